"""The ``clock`` tool: the time now, today's date and weekday, and the days between two dates, in this
machine's time zone."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

DESCRIPTION = ("The current date, time and weekday in this machine's time zone, or the number of days between "
               "two dates.")


class ClockArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    action: Literal["now", "today", "days_between"] = Field(
        "now", description="now: date, time, weekday and time zone; today: the date and weekday; days_between: "
                           "the days from `start` to `end`.")
    start: dt.date | None = Field(None, description="days_between: the first date, YYYY-MM-DD (default today).")
    end: dt.date | None = Field(None, description="days_between: the second date, YYYY-MM-DD (default today).")


def local_now() -> dt.datetime:
    return dt.datetime.now().astimezone()


def read_clock(arguments: ClockArguments, now: Callable[[], dt.datetime] = local_now) -> str:
    current = now()
    if arguments.action == "now":
        offset = current.strftime("%z")
        return (f"{current:%A}, {current:%Y-%m-%d} {current:%H:%M:%S}, time zone {current.tzname()} "
                f"(UTC{offset[:3]}:{offset[3:]})")
    today = current.date()
    if arguments.action == "today":
        return f"{today:%A}, {today:%Y-%m-%d}"
    start, end = arguments.start or today, arguments.end or today
    days = (end - start).days
    unit = "day" if abs(days) == 1 else "days"
    if days == 0:
        return f"{start:%Y-%m-%d} ({start:%A}) and {end:%Y-%m-%d} are the same day: 0 days."
    direction = "after" if days > 0 else "before"
    return (f"{abs(days)} {unit}: {end:%Y-%m-%d} ({end:%A}) is {abs(days)} {unit} {direction} "
            f"{start:%Y-%m-%d} ({start:%A}).")
