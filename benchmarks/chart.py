"""The acceptance curve as a PNG: speed-up over drafter off against the acceptance of the first draft, one colour
per block, measured (solid, with the runs' min-max as a bar) and ideal (dashed), auto in black.

``benchmarks.acceptance RIG --chart PATH`` adds the run on RIG to PATH's record (PATH with the suffix ``.json``:
one entry per rig, the newest kept) and draws PATH from every entry, so a curve over five rigs is five runs of
the benchmark, each redrawing it. Drawn with Pillow (already a dependency of the app), no plotting library.
"""

from __future__ import annotations

import json
from pathlib import Path

WIDTH, HEIGHT = 1000, 640
LEFT, RIGHT, TOP, BOTTOM = 80, 170, 70, 90  # the plot's margins: axis labels, legend, title, caption
COLOURS = {2: (31, 119, 180), 3: (255, 127, 14), 4: (44, 160, 44), 5: (214, 39, 40), 6: (148, 103, 189),
           7: (140, 86, 75), 8: (227, 119, 194)}
AUTO_COLOUR = (0, 0, 0)
GRID = (225, 225, 225)


def record_path(chart: Path) -> Path:
    return chart.with_suffix(".json")


def add_run(chart: Path, run: dict) -> list[dict]:
    """``run`` (one rig's rows) added to the chart's record, replacing an earlier run on the same rig; returns
    every run, ordered by acceptance."""
    path = record_path(chart)
    runs = json.loads(path.read_text()) if path.exists() else []
    runs = [r for r in runs if r["model"] != run["model"]] + [run]
    runs.sort(key=lambda r: r["acceptance"])
    path.write_text(json.dumps(runs, indent=1) + "\n")
    return runs


def draw(chart: Path, runs: list[dict], title: str, caption: str) -> None:
    from PIL import Image, ImageDraw, ImageFont

    font = ImageFont.load_default(size=14)
    small = ImageFont.load_default(size=12)
    image = Image.new("RGB", (WIDTH, HEIGHT), "white")
    pen = ImageDraw.Draw(image)
    values = [v for r in runs for row in r["blocks"].values() for v in (row["max"], row.get("ideal") or 0)]
    top = max(2.0, *values) * 1.05 if values else 2.0
    x0, x1 = min(0.5, *(r["acceptance"] for r in runs)), 1.0
    plot = (LEFT, TOP, WIDTH - RIGHT, HEIGHT - BOTTOM)

    def at(x: float, y: float) -> tuple[float, float]:
        return (plot[0] + (x - x0) / (x1 - x0) * (plot[2] - plot[0]),
                plot[3] - y / top * (plot[3] - plot[1]))

    step = 0.5 if top <= 4 else 1.0
    y = 0.0
    while y <= top:
        pen.line([at(x0, y), at(x1, y)], fill=GRID)
        pen.text((plot[0] - 8, at(x0, y)[1]), f"{y:g}x", fill="black", font=small, anchor="rm")
        y += step
    for tenth in range(int(x0 * 10), 11):
        x = tenth / 10
        pen.line([at(x, 0), at(x, top)], fill=GRID)
        pen.text((at(x, 0)[0], plot[3] + 8), f"{x:.1f}", fill="black", font=small, anchor="mt")
    pen.line([at(x0, 1), at(x1, 1)], fill=(120, 120, 120), width=2)  # drafter off
    pen.rectangle(plot, outline="black")
    pen.text(((plot[0] + plot[2]) / 2, plot[3] + 30), "acceptance of the first draft", fill="black", font=font,
             anchor="mt")
    pen.text((plot[0] - 60, plot[1] - 20), "speed-up over drafter off", fill="black", font=font)

    blocks = sorted({k for r in runs for k in r["blocks"]}, key=lambda k: (k == "auto", int(k) if k != "auto" else 0))
    for key in blocks:
        colour = AUTO_COLOUR if key == "auto" else COLOURS.get(int(key), (100, 100, 100))
        points = [(r["acceptance"], r["blocks"][key]) for r in runs if key in r["blocks"]]
        measured = [at(a, row["median"]) for a, row in points]
        if len(measured) > 1:
            pen.line(measured, fill=colour, width=3 if key == "auto" else 2)
        for (a, row), point in zip(points, measured):
            pen.line([at(a, row["min"]), at(a, row["max"])], fill=colour, width=1)
            pen.ellipse([point[0] - 3, point[1] - 3, point[0] + 3, point[1] + 3], fill=colour)
        ideal = [at(a, row["ideal"]) for a, row in points if row.get("ideal")]
        for start, end in zip(ideal, ideal[1:]):
            dashed(pen, start, end, colour)
    legend_x, legend_y = plot[2] + 20, plot[1]
    for i, key in enumerate(blocks):
        colour = AUTO_COLOUR if key == "auto" else COLOURS.get(int(key), (100, 100, 100))
        y = legend_y + 22 * i
        pen.line([(legend_x, y + 7), (legend_x + 24, y + 7)], fill=colour, width=3)
        pen.text((legend_x + 32, y), "auto" if key == "auto" else f"block {key}", fill="black", font=font)
    y = legend_y + 22 * len(blocks) + 14
    pen.text((legend_x, y), "solid: measured", fill="black", font=small)
    pen.text((legend_x, y + 18), "dashed: ideal", fill="black", font=small)
    pen.text((legend_x, y + 36), "bars: min-max", fill="black", font=small)
    pen.text((LEFT, 20), title, fill="black", font=font)
    pen.text((LEFT, HEIGHT - 30), caption, fill=(80, 80, 80), font=small)
    image.save(chart)


def dashed(pen, start: tuple[float, float], end: tuple[float, float], colour, dash: float = 8.0) -> None:
    (ax, ay), (bx, by) = start, end
    length = max(((bx - ax) ** 2 + (by - ay) ** 2) ** 0.5, 1e-9)
    n = int(length // dash)
    for i in range(0, n + 1, 2):
        t0, t1 = i * dash / length, min((i + 1) * dash / length, 1.0)
        pen.line([(ax + (bx - ax) * t0, ay + (by - ay) * t0), (ax + (bx - ax) * t1, ay + (by - ay) * t1)],
                 fill=colour, width=2)
