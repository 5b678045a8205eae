"""A small SVG writer: shapes, escaped text, linear axes; the report's figures need no plotting
library, and every string that reaches the file is escaped."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

FONT = "font-family='DejaVu Sans, Helvetica, Arial, sans-serif'"


def _attrs(values: dict[str, object]) -> str:
    return " ".join(
        f"{key.rstrip('_').replace('_', '-')}={quoteattr(_number(value))}"
        for key, value in values.items()
        if value is not None
    )


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


@dataclass
class Canvas:
    """An SVG document built shape by shape."""

    width: float
    height: float
    title: str
    parts: list[str] = field(default_factory=list)

    def element(
        self, tag: str, attrs: dict[str, object], text: str = "", tooltip: str | None = None
    ) -> None:
        """One element; `text` is its (escaped) content, `tooltip` an SVG <title> child."""
        inner = escape(text)
        if tooltip is not None:
            inner = f"<title>{escape(tooltip)}</title>" + inner
        self.parts.append(f"<{tag} {_attrs(attrs)}>{inner}</{tag}>")

    def shape(self, tag: str, tooltip: str | None = None, /, **attrs: object) -> None:
        """A shape (rect, circle, path...) with its attributes and a hover text."""
        self.element(tag, attrs, tooltip=tooltip)

    def line(self, x1: float, y1: float, x2: float, y2: float, **attrs: object) -> None:
        """A straight line."""
        self.element("line", {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "stroke": "#444", **attrs})

    def polyline(self, points: list[tuple[float, float]], **attrs: object) -> None:
        """Connected segments through `points`."""
        if points:
            coords = " ".join(f"{_number(x)},{_number(y)}" for x, y in points)
            self.element("polyline", {"points": coords, "fill": "none", **attrs})

    def text(self, x: float, y: float, value: str, size: float = 11, **attrs: object) -> None:
        """A label (escaped)."""
        fill = attrs.pop("fill", "#222")
        self.element("text", {"x": x, "y": y, "font_size": size, "fill": fill, **attrs}, value)

    def render(self) -> str:
        """The whole document: valid, standalone XML."""
        head = (
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{_number(self.width)}' "
            f"height='{_number(self.height)}' viewBox='0 0 {_number(self.width)} "
            f"{_number(self.height)}' {FONT} role='img'>"
        )
        body = [f"<title>{escape(self.title)}</title>", *self.parts]
        background = (
            f"<rect width='{_number(self.width)}' height='{_number(self.height)}' fill='white'/>"
        )
        return (
            "\n".join(["<?xml version='1.0' encoding='UTF-8'?>", head, background, *body, "</svg>"])
            + "\n"
        )


@dataclass(frozen=True)
class Scale:
    """A linear map from data values to pixels."""

    low: float
    high: float
    start: float
    end: float

    def __call__(self, value: float) -> float:
        span = self.high - self.low or 1.0
        return self.start + (value - self.low) / span * (self.end - self.start)


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (about `count` of them)."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return [low]
    raw = (high - low) / max(1, count)
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.ceil(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    return ticks


@dataclass(frozen=True)
class Plot:
    """A plotting area inside a canvas, with its two scales."""

    x: Scale
    y: Scale
    base: float | None = None  # where the x axis is drawn (None: at the y scale's low end)

    def axes(self, canvas: Canvas, x_label: str, y_label: str, y_format: str = "{:g}") -> None:
        """Both axes with ticks, grid lines and labels."""
        left, right, top = self.x.start, self.x.end, self.y.end
        bottom = self.base if self.base is not None else self.y.start
        for tick in nice_ticks(self.y.low, self.y.high):
            y = self.y(tick)
            canvas.line(left, y, right, y, stroke="#e3e3e3")
            canvas.text(left - 6, y + 4, y_format.format(tick), text_anchor="end", size=10)
        for tick in nice_ticks(self.x.low, self.x.high):
            x = self.x(tick)
            canvas.line(x, bottom, x, bottom + 4)
            canvas.text(x, bottom + 16, f"{tick:g}", text_anchor="middle", size=10)
        canvas.line(left, bottom, right, bottom)
        canvas.line(left, bottom, left, top)
        canvas.text((left + right) / 2, bottom + 32, x_label, text_anchor="middle")
        middle = (top + bottom) / 2
        canvas.text(
            14, middle, y_label, text_anchor="middle", transform=f"rotate(-90 14 {middle:.1f})"
        )
