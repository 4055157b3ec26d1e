"""Date encoder settings (Ludwig 0.17's DateEmbed and DateWave).

A date input is nine numbers: year, month, day, weekday (Monday 0), day of the year, hour,
minute, second and second of the day. Both encoders map the year linearly and the second of the
day periodically; they differ in the other seven: a learned vector per value (embed) or a point
on a circle (wave). Fully connected layers follow.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from plait.config.encoder_settings import EMBEDDINGS_ON_CPU, EncoderBase, FCSettings

DATE_COMPONENTS = ("year", "month", "day", "weekday", "yearday", "hour", "minute", "second", "second_of_day")
"""The numbers of a date, in Ludwig's order: what date preprocessing writes per value, and what
the encoders (and a GBM's trees) read."""


class DateEmbedEncoder(EncoderBase, FCSettings):
    """A learned vector for each value of month, day, weekday, day of the year, hour, minute and
    second; the year through a linear map (scaled to [0, 1] over the training years first; Ludwig
    maps the raw year, about 2000, which swamps everything else); the second of the day as
    cos(2π s / 86400). All concatenated, then fully connected layers."""

    type: Literal["embed"] = "embed"
    embedding_size: int = Field(10, gt=0)
    """Width of each component's vectors."""
    embeddings_on_cpu: Annotated[bool, EMBEDDINGS_ON_CPU] = False
    """Ludwig's placement of the tables in CPU memory; plait accepts only false."""
    output_size: int = Field(10, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    num_fc_layers: int = Field(0, ge=0)
    """Fully connected layers after the concatenation (unless fc_layers is given)."""


class DateWaveEncoder(EncoderBase, FCSettings):
    """Month, day, weekday, day of the year, hour, minute and second each as sin and cos of
    2π value / period (Ludwig: cos only, which cannot tell 6:00 from 18:00), the year and the
    second of the day as for embed, then fully connected layers. Nothing to learn before them."""

    type: Literal["wave"] = "wave"
    output_size: int = Field(10, gt=0)
    """Width of each fully connected layer (unless its fc_layers entry says otherwise)."""
    num_fc_layers: int = Field(1, ge=0)
    """Fully connected layers after the concatenation (unless fc_layers is given)."""
