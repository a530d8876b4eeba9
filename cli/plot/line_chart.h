// A line chart: series of (x, y) points over one x axis, each against a left or a right y axis,
// with a title, axis labels, nice ticks and a legend, rendered with cairo to a PNG or an SVG of
// a given size. It knows nothing of runs or sweeps: cli/loss_plot.h builds the charts.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace trainctl {

struct Rgb {
  double red = 0, green = 0, blue = 0;  // 0 to 1
};

// A qualitative palette whose neighbours are easy to tell apart; it repeats after ten colours.
Rgb palette_color(size_t index);

struct LineStyle {
  Rgb color;
  double width = 1.5;  // pixels
  bool dashed = false;
  bool markers = false;  // a dot at every point
};

struct Point {
  double x = 0, y = 0;
};

enum class YAxis { kLeft, kRight };

struct Series {
  std::vector<Point> points;  // drawn in this order
  LineStyle style;
  YAxis axis = YAxis::kLeft;
  // Drawn last and thicker; while any series is highlighted, the others are drawn faded.
  bool highlighted = false;
  // Drawn fainter still: a line that matters less than the faded ones (a trial stopped early).
  bool faint = false;
};

struct LegendEntry {
  std::string text;
  LineStyle style;
  bool emphasized = false;  // bold text
};

struct LineChart {
  std::string title;
  std::string x_label;
  std::string left_label;
  std::string right_label;  // the right axis is drawn only when a series uses it
  std::vector<Series> series;
  std::vector<LegendEntry> legend;  // a column right of the plot area; entries that do not fit are counted
};

// Tick positions for an axis over [low, high]: about `target_count` steps of 1, 2, 2.5 or 5
// times a power of ten, the first at or below low and the last at or above high.
struct AxisTicks {
  std::vector<double> values;
  int decimals = 0;  // enough to tell neighbouring ticks apart
};
AxisTicks nice_ticks(double low, double high, int target_count);

struct PixelRect {
  int left = 0, top = 0, width = 0, height = 0;
  bool contains(int x, int y) const { return x >= left && x < left + width && y >= top && y < top + height; }
};

// Where render_chart drew: series only inside plot_area, their legend swatches inside legend.
struct ChartLayout {
  PixelRect plot_area;
  PixelRect legend;
};

enum class ImageFormat { kPng, kSvg };
// By the file name's extension, .png or .svg (any case); nullopt for any other.
std::optional<ImageFormat> image_format_of(std::string_view path);

// Writes the chart to `path`, `width` x `height` pixels (points, for SVG). Throws
// std::runtime_error naming the file when cairo cannot write it.
ChartLayout render_chart(const LineChart& chart, const std::string& path, ImageFormat format, int width, int height);

}  // namespace trainctl
