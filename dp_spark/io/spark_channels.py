"""Spark's own channels, the UI and the event log, and the one-line notice when they are on.

Spark shows exact figures of every run in its web UI (the SQL tab's "number of output rows", the
stages' records read and shuffled) and writes the same figures to its event log, which the History
Server serves. Those figures are not private: from them a reader can tell the number of records,
of users and of records kept by bounding, and so remove the noise from a released total. No
library running on Spark can noise Spark's own metrics, so they lie outside the release, on the
operator's side with the raw data (docs/privacy.md, "What readers can see").

What this module does about it: a job's session starts with the UI off (the setting is in
``io.session.DEFAULT_SPARK_CONF``, which the config and spark-defaults override), and whenever a
session has the UI or the event log on, the run says so in one line, and the API warns once per
session with :class:`SparkChannelsNotice`, which a user silences by name::

    warnings.filterwarnings("ignore", category=dp_spark.SparkChannelsNotice)

Whether the notice is given depends on the session's settings alone, never on the data.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable

UI = "spark.ui.enabled"
EVENT_LOG = "spark.eventLog.enabled"
# Spark's own defaults, which hold when a session was started without the setting.
SPARK_DEFAULTS = {UI: True, EVENT_LOG: False}
NAMES = {UI: "the Spark UI", EVENT_LOG: "the event log"}
UNKNOWN = object()  # a setting the session would not tell


class SparkChannelsNotice(UserWarning):
    """The session's Spark UI or event log is on: it shows exact, non-private figures of the data."""


def channels_on(setting: Callable[[str], str | None]) -> tuple[str, ...]:
    """The settings among UI and EVENT_LOG that are on, given ``setting(key)``: the session's value
    of a key, None when it was never set (then Spark's default holds), or UNKNOWN when it cannot be
    read (then the channel may be on, and is counted on)."""
    on = []
    for key, default in SPARK_DEFAULTS.items():
        value = setting(key)
        if value is UNKNOWN:
            is_on = True
        elif value is None:
            is_on = default
        else:
            is_on = str(value).strip().lower() == "true"
        if is_on:
            on.append(key)
    return tuple(on)


def session_channels(spark, context=None) -> tuple[str, ...]:
    """The channels on in ``spark``. A classic session's own settings are not enough: a builder's
    .config() on a session already running is copied into them while the context, its UI and its
    event log keep the settings they started with; so the ``context``'s are read (by default the
    driver's one SparkContext). A Spark Connect session reports its server's, which a client
    cannot change."""
    from dp_spark.io.session import is_connect

    if is_connect(spark):
        def setting(key):
            try:
                return spark.conf.get(key, None)
            except Exception:  # noqa: BLE001 - a server that hides the setting
                return UNKNOWN
    else:
        if context is None:
            from pyspark import SparkContext

            context = SparkContext.getOrCreate()  # the session's own: one context per driver

        def setting(key):
            if key == UI:  # the UI that runs, whatever the settings say
                return "true" if context.uiWebUrl else "false"
            return context.getConf().get(key, None)
    return channels_on(setting)


def notice(channels: tuple[str, ...]) -> str | None:
    """The one-line notice for ``channels`` (from :func:`channels_on`), or None when none is on."""
    if not channels:
        return None
    names = " and ".join(NAMES[key] for key in channels)
    off = " and ".join(f"{key} = false" for key in channels)
    one = len(channels) == 1
    return (f"NOTE: {names} {'is' if one else 'are'} on, and Spark shows exact figures of the data there (rows "
            f"read, rows per step): not private, for the operator's eyes only, like the raw data (docs/privacy.md, "
            f"\"What readers can see\"); {off} {'turns it' if one else 'turn them'} off")


def announce(spark, progress: Callable[[str], None]) -> None:
    """A job's line: the notice in the run's log (text or JSON) when the session has a channel on."""
    line = notice(session_channels(spark))
    if line is not None:
        progress(line)


_WARNED: set[str] = set()  # the sessions already warned


def warn_once(spark) -> None:
    """The API's notice: a SparkChannelsNotice the first time a session with a channel on releases,
    shown at the user's line that asked for the release."""
    line = notice(session_channels(spark))
    if line is None:
        return
    key = _session_key(spark)
    if key in _WARNED:
        return
    _WARNED.add(key)
    warnings.warn(line, SparkChannelsNotice, stacklevel=_outside_the_package())


def _outside_the_package() -> int:
    """The stacklevel of the first caller outside dp_spark, as warnings.warn counts it from here."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "dp_spark":
        frame, level = frame.f_back, level + 1
    return level


def _session_key(spark) -> str:
    """A Spark Connect session's id (sessions on one server share an application id), else the
    application's id, else the object's."""
    session_id = getattr(spark, "session_id", None)
    if isinstance(session_id, str):
        return session_id
    try:
        return str(spark.conf.get("spark.app.id", None) or id(spark))
    except Exception:  # noqa: BLE001 - any stable name will do
        return str(id(spark))
