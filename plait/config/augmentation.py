"""Ludwig's image ``augmentation``: random changes to training images, drawn anew for every image
of every batch while training (never at evaluation or prediction).

``augmentation: true`` is Ludwig's default list (a horizontal flip, then a rotation); ``false``
or ``[]``: none. Operations apply in the order given.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union

from pydantic import Field, model_validator

from plait.config.base import StrictModel, field_error, ludwig_types_not_implemented


class RandomHorizontalFlip(StrictModel):
    """Half of the images mirrored left to right."""

    type: Literal["random_horizontal_flip"] = "random_horizontal_flip"


class RandomVerticalFlip(StrictModel):
    """Half of the images mirrored top to bottom."""

    type: Literal["random_vertical_flip"] = "random_vertical_flip"


class RandomRotate(StrictModel):
    """Each image turned by an angle drawn evenly from [-degree, degree] about its centre (corners
    that come from outside the image are black)."""

    type: Literal["random_rotate"] = "random_rotate"
    degree: int = Field(15, ge=0, le=180)
    """The largest angle, in degrees."""


class RandomBlur(StrictModel):
    """Each image blurred with a Gaussian kernel of this size, its spread drawn from [0.1, 2.0]
    pixels."""

    type: Literal["random_blur"] = "random_blur"
    kernel_size: int = Field(3, ge=1)
    """Width of the (square) kernel in pixels; odd."""

    @model_validator(mode="after")
    def _odd(self):
        if self.kernel_size % 2 == 0:
            raise field_error("kernel_size", f"got {self.kernel_size}; a blur kernel has a centre pixel, so its "
                                             f"size is odd (such as {self.kernel_size + 1})")
        return self


class _FactorRange(StrictModel):
    min: float = Field(0.5, ge=0)
    """Smallest factor."""
    max: float = Field(2.0, ge=0)
    """Largest factor."""

    @model_validator(mode="after")
    def _ordered(self):
        if self.min > self.max:
            raise field_error("min", f"got {self.min}, above max ({self.max}); give min <= max")
        return self


class RandomBrightness(_FactorRange):
    """Each image's pixel values multiplied by a factor drawn evenly from [min, max] (clipped to the
    valid range)."""

    type: Literal["random_brightness"] = "random_brightness"


class RandomContrast(_FactorRange):
    """Each image's distance from its mean grey level multiplied by a factor drawn evenly from
    [min, max] (clipped to the valid range)."""

    type: Literal["random_contrast"] = "random_contrast"


AugmentationOp = Annotated[Union[RandomHorizontalFlip, RandomVerticalFlip, RandomRotate, RandomBlur,
                                 RandomBrightness, RandomContrast], Field(discriminator="type")]

DEFAULT_AUGMENTATION = [RandomHorizontalFlip(), RandomRotate()]
"""What ``augmentation: true`` means (Ludwig's list)."""

AUGMENTATION_CLASSES = (RandomHorizontalFlip, RandomVerticalFlip, RandomRotate, RandomBlur, RandomBrightness,
                        RandomContrast)


def augmentation_list(value):
    """``true``, ``false``, null or a list, as the list of operations it stands for."""
    if value is True:
        return [op.model_dump() for op in DEFAULT_AUGMENTATION]
    if value is False or value is None:
        return []
    return value


ludwig_types_not_implemented("augmentation", {
    "auto_augmentation": "plait has no learned augmentation policies; list the operations instead "
                         "(random_horizontal_flip, random_rotate, random_blur, random_brightness, random_contrast)",
})
