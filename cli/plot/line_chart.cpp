// The line chart's layout and its drawing with cairo: see line_chart.h.
#include "line_chart.h"

#include <cairo-svg.h>
#include <cairo.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

namespace trainctl {

namespace {

// Fontconfig resolves the name; a system without DejaVu gets its default sans-serif instead.
constexpr const char* kFontFamily = "DejaVu Sans";
constexpr double kTitleSize = 15;
constexpr double kLabelSize = 12;
constexpr double kTickSize = 11;
constexpr double kLegendSize = 11;
constexpr int kMargin = 12;
constexpr int kTickLength = 4;
constexpr int kGap = 5;    // between a tick and its label, a label and its axis title
constexpr int kInset = 6;  // between the frame and the data, so that markers at the edges show whole
constexpr int kLegendPadding = 8;
constexpr int kSwatchWidth = 26;
constexpr double kFadedAlpha = 0.5;
constexpr double kFaintAlpha = 0.2;
constexpr double kHighlightWidthFactor = 2.0;
// The pixels a tick should have to itself, so that labels such as 12500 do not touch.
constexpr int kPixelsPerXTick = 75;
constexpr int kPixelsPerYTick = 60;
// Fixed-point tick labels up to this many decimals; beyond, exponent notation reads better.
constexpr int kMaxFixedDecimals = 6;
constexpr Rgb kInk{0.15, 0.15, 0.15};
constexpr Rgb kGridColor{0.89, 0.89, 0.89};
constexpr Rgb kLegendFrame{0.75, 0.75, 0.75};

using SurfaceHandle = std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)>;
using ContextHandle = std::unique_ptr<cairo_t, decltype(&cairo_destroy)>;

struct Range {
  double low = 0, high = 0;
};

std::optional<Range> data_range(const LineChart& chart, bool along_x, std::optional<YAxis> axis) {
  std::optional<Range> range;
  for (const Series& series : chart.series) {
    if (axis && series.axis != *axis) continue;
    for (const Point& point : series.points) {
      const double value = along_x ? point.x : point.y;
      if (!std::isfinite(value)) continue;
      if (!range) range = Range{value, value};
      range->low = std::min(range->low, value);
      range->high = std::max(range->high, value);
    }
  }
  return range;
}

std::string tick_label(double value, int decimals) {
  if (decimals > kMaxFixedDecimals) return fmt::format("{:.2g}", value);
  return fmt::format("{:.{}f}", value, decimals);
}

void set_color(cairo_t* cr, const Rgb& color, double alpha = 1.0) {
  cairo_set_source_rgba(cr, color.red, color.green, color.blue, alpha);
}

void set_font(cairo_t* cr, double size, bool bold = false) {
  cairo_select_font_face(cr, kFontFamily, CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

double text_width(cairo_t* cr, const std::string& text) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  return extents.x_advance;
}

enum class Align { kStart, kCenter, kEnd };

// Draws `text` with its ink centred vertically on y, and x at its start, centre or end.
void draw_text(cairo_t* cr, const std::string& text, double x, double y, Align align) {
  cairo_text_extents_t extents;
  cairo_text_extents(cr, text.c_str(), &extents);
  const double shift = align == Align::kStart ? 0 : align == Align::kCenter ? extents.x_advance / 2 : extents.x_advance;
  cairo_move_to(cr, x - shift, y - (extents.y_bearing + extents.height / 2));
  cairo_show_text(cr, text.c_str());
}

// Text read bottom to top, centred on (x, y): a y axis's title.
void draw_vertical_text(cairo_t* cr, const std::string& text, double x, double y) {
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, -std::numbers::pi / 2);
  draw_text(cr, text, 0, 0, Align::kCenter);
  cairo_restore(cr);
}

// Maps an axis's tick span onto pixels, kInset inside the plot area's edges.
struct Scale {
  double data_low = 0, data_high = 1, pixel_low = 0, pixel_high = 1;
  double operator()(double value) const {
    return pixel_low + (value - data_low) / (data_high - data_low) * (pixel_high - pixel_low);
  }
};

struct Axis {
  AxisTicks ticks;
  std::vector<std::string> labels;
  double label_width = 0;  // the widest tick label
};

Axis make_axis(cairo_t* cr, const Range& range, int pixels, int pixels_per_tick) {
  Axis axis{nice_ticks(range.low, range.high, std::max(2, pixels / pixels_per_tick)), {}, 0};
  set_font(cr, kTickSize);
  for (double value : axis.ticks.values) {
    axis.labels.push_back(tick_label(value, axis.ticks.decimals));
    axis.label_width = std::max(axis.label_width, text_width(cr, axis.labels.back()));
  }
  return axis;
}

Scale scale_of(const Axis& axis, double pixel_low, double pixel_high) {
  return Scale{axis.ticks.values.front(), axis.ticks.values.back(), pixel_low, pixel_high};
}

void apply_line_style(cairo_t* cr, const LineStyle& style, double width) {
  cairo_set_line_width(cr, width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  cairo_set_line_cap(cr, CAIRO_LINE_CAP_BUTT);
  if (style.dashed) {
    const std::array<double, 2> dashes{std::max(5.0, 4 * width), std::max(3.0, 2.5 * width)};
    cairo_set_dash(cr, dashes.data(), static_cast<int>(dashes.size()), 0);
  } else {
    cairo_set_dash(cr, nullptr, 0, 0);
  }
}

void draw_marker(cairo_t* cr, double x, double y, double line_width) {
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, line_width + 1.5, 0, 2 * std::numbers::pi);
  cairo_fill(cr);
}

void draw_series(cairo_t* cr, const Series& series, const Scale& x_scale, const Scale& y_scale, double alpha) {
  const double width = series.style.width * (series.highlighted ? kHighlightWidthFactor : 1.0);
  set_color(cr, series.style.color, alpha);
  apply_line_style(cr, series.style, width);
  bool pen_down = false;
  for (const Point& point : series.points) {
    if (!std::isfinite(point.x) || !std::isfinite(point.y)) {
      pen_down = false;  // a gap, not a line through a missing value
      continue;
    }
    if (pen_down)
      cairo_line_to(cr, x_scale(point.x), y_scale(point.y));
    else
      cairo_move_to(cr, x_scale(point.x), y_scale(point.y));
    pen_down = true;
  }
  cairo_stroke(cr);
  if (!series.style.markers) return;
  for (const Point& point : series.points)
    if (std::isfinite(point.x) && std::isfinite(point.y)) draw_marker(cr, x_scale(point.x), y_scale(point.y), width);
}

struct LegendLayout {
  PixelRect box;
  size_t shown = 0;     // entries drawn
  size_t left_out = 0;  // counted on a last line instead
};

double legend_row_height() { return std::ceil(kLegendSize * 1.7); }

// The widest entry sets the column's width, up to 40% of the chart; longer texts are cut.
int legend_width(cairo_t* cr, const LineChart& chart, int chart_width) {
  if (chart.legend.empty()) return 0;
  double widest = 0;
  for (const LegendEntry& entry : chart.legend) {
    set_font(cr, kLegendSize, entry.emphasized);
    widest = std::max(widest, text_width(cr, entry.text));
  }
  const double wanted = 2 * kLegendPadding + kSwatchWidth + kGap + widest;
  return static_cast<int>(std::ceil(std::min(wanted, 0.4 * chart_width)));
}

LegendLayout layout_legend(const LineChart& chart, int left, int top, int width, int available_height) {
  const double row = legend_row_height();
  const auto rows_that_fit = static_cast<size_t>(std::max(0.0, (available_height - 2 * kLegendPadding) / row));
  LegendLayout layout;
  layout.shown =
      chart.legend.size() <= rows_that_fit ? chart.legend.size() : (rows_that_fit > 0 ? rows_that_fit - 1 : 0);
  layout.left_out = chart.legend.size() - layout.shown;
  const size_t rows = layout.shown + (layout.left_out > 0 ? 1 : 0);
  layout.box = PixelRect{left, top, width, static_cast<int>(std::ceil(rows * row)) + 2 * kLegendPadding};
  return layout;
}

void draw_legend(cairo_t* cr, const LineChart& chart, const LegendLayout& layout) {
  const PixelRect& box = layout.box;
  cairo_save(cr);
  cairo_rectangle(cr, box.left + 0.5, box.top + 0.5, box.width - 1, box.height - 1);
  set_color(cr, {1, 1, 1});
  cairo_fill_preserve(cr);
  set_color(cr, kLegendFrame);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  cairo_rectangle(cr, box.left, box.top, box.width, box.height);
  cairo_clip(cr);
  const double row = legend_row_height();
  const double swatch_left = box.left + kLegendPadding;
  const double text_left = swatch_left + kSwatchWidth + kGap;
  for (size_t i = 0; i < layout.shown; ++i) {
    const LegendEntry& entry = chart.legend[i];
    const double y = box.top + kLegendPadding + (static_cast<double>(i) + 0.5) * row;
    set_color(cr, entry.style.color);
    apply_line_style(cr, entry.style, entry.style.width);
    cairo_move_to(cr, swatch_left, y);
    cairo_line_to(cr, swatch_left + kSwatchWidth, y);
    cairo_stroke(cr);
    if (entry.style.markers) draw_marker(cr, swatch_left + kSwatchWidth / 2.0, y, entry.style.width);
    set_color(cr, kInk);
    set_font(cr, kLegendSize, entry.emphasized);
    draw_text(cr, entry.text, text_left, y, Align::kStart);
  }
  if (layout.left_out > 0) {
    set_color(cr, kInk);
    set_font(cr, kLegendSize);
    draw_text(cr, fmt::format("… and {} more", layout.left_out), text_left,
              box.top + kLegendPadding + (static_cast<double>(layout.shown) + 0.5) * row, Align::kStart);
  }
  cairo_restore(cr);
}

ChartLayout draw_chart(cairo_t* cr, const LineChart& chart, int width, int height) {
  const std::optional<Range> x_range = data_range(chart, true, std::nullopt);
  const std::optional<Range> left_range = data_range(chart, false, YAxis::kLeft);
  const std::optional<Range> right_range = data_range(chart, false, YAxis::kRight);
  const int title_height = chart.title.empty() ? 0 : static_cast<int>(std::ceil(kTitleSize * 1.5));
  const int label_height = static_cast<int>(std::ceil(kLabelSize * 1.4));
  const int tick_text_height = static_cast<int>(std::ceil(kTickSize * 1.3));
  const int top_edge = kMargin + title_height + kGap;
  const int bottom_edge = height - kMargin - label_height - kGap - tick_text_height - kGap - kTickLength;
  // The y axes' labels set the plot area's width, and with it how many x ticks fit. An empty
  // chart still gets its frame and axes, over [0, 1].
  const Axis left_axis = make_axis(cr, left_range.value_or(Range{0, 1}), bottom_edge - top_edge, kPixelsPerYTick);
  const bool has_right_axis = right_range.has_value();
  const Axis right_axis = make_axis(cr, right_range.value_or(Range{0, 1}), bottom_edge - top_edge, kPixelsPerYTick);
  const int legend_column = legend_width(cr, chart, width);
  const int left_edge =
      kMargin + label_height + kGap + static_cast<int>(std::ceil(left_axis.label_width)) + kGap + kTickLength;
  const int right_edge =
      width - kMargin - (legend_column > 0 ? legend_column + kMargin : 0) -
      (has_right_axis ? kTickLength + kGap + static_cast<int>(std::ceil(right_axis.label_width)) + kGap + label_height
                      : kMargin);
  if (right_edge - left_edge < 4 * kInset || bottom_edge - top_edge < 4 * kInset)
    throw std::invalid_argument(fmt::format("a {}x{} image leaves no room for the plot", width, height));
  ChartLayout layout;
  layout.plot_area = PixelRect{left_edge, top_edge, right_edge - left_edge, bottom_edge - top_edge};
  const PixelRect& area = layout.plot_area;
  const Axis x_axis = make_axis(cr, x_range.value_or(Range{0, 1}), area.width, kPixelsPerXTick);
  const Scale x_scale = scale_of(x_axis, area.left + kInset, area.left + area.width - kInset);
  const Scale left_scale = scale_of(left_axis, area.top + area.height - kInset, area.top + kInset);
  const Scale right_scale = scale_of(right_axis, area.top + area.height - kInset, area.top + kInset);

  set_color(cr, {1, 1, 1});
  cairo_paint(cr);

  // The grid follows the left axis; the right axis's ticks alone say where its values lie.
  set_color(cr, kGridColor);
  cairo_set_line_width(cr, 1);
  for (double value : x_axis.ticks.values) {
    const double x = std::round(x_scale(value)) + 0.5;
    cairo_move_to(cr, x, area.top);
    cairo_line_to(cr, x, area.top + area.height);
  }
  for (double value : left_axis.ticks.values) {
    const double y = std::round(left_scale(value)) + 0.5;
    cairo_move_to(cr, area.left, y);
    cairo_line_to(cr, area.left + area.width, y);
  }
  cairo_stroke(cr);

  cairo_save(cr);
  cairo_rectangle(cr, area.left, area.top, area.width, area.height);
  cairo_clip(cr);
  const bool any_highlighted =
      std::any_of(chart.series.begin(), chart.series.end(), [](const Series& series) { return series.highlighted; });
  for (bool highlighted_pass : {false, true})
    for (const Series& series : chart.series) {
      if (series.highlighted != highlighted_pass) continue;
      const double alpha = series.faint ? kFaintAlpha : any_highlighted && !series.highlighted ? kFadedAlpha : 1.0;
      draw_series(cr, series, x_scale, series.axis == YAxis::kRight ? right_scale : left_scale, alpha);
    }
  cairo_restore(cr);

  set_color(cr, kInk);
  cairo_set_dash(cr, nullptr, 0, 0);
  cairo_set_line_width(cr, 1);
  cairo_rectangle(cr, area.left + 0.5, area.top + 0.5, area.width - 1, area.height - 1);
  cairo_stroke(cr);

  set_font(cr, kTickSize);
  const double bottom = area.top + area.height;
  for (size_t i = 0; i < x_axis.ticks.values.size(); ++i) {
    const double x = std::round(x_scale(x_axis.ticks.values[i])) + 0.5;
    cairo_move_to(cr, x, bottom);
    cairo_line_to(cr, x, bottom + kTickLength);
    cairo_stroke(cr);
    draw_text(cr, x_axis.labels[i], x, bottom + kTickLength + kGap + tick_text_height / 2.0, Align::kCenter);
  }
  const auto draw_y_ticks = [&](const Axis& axis, const Scale& scale, bool on_right) {
    const double edge = on_right ? area.left + area.width : area.left;
    const double outward = on_right ? kTickLength : -kTickLength;
    for (size_t i = 0; i < axis.ticks.values.size(); ++i) {
      const double y = std::round(scale(axis.ticks.values[i])) + 0.5;
      cairo_move_to(cr, edge, y);
      cairo_line_to(cr, edge + outward, y);
      cairo_stroke(cr);
      draw_text(cr, axis.labels[i], edge + outward + (on_right ? kGap : -kGap), y,
                on_right ? Align::kStart : Align::kEnd);
    }
  };
  draw_y_ticks(left_axis, left_scale, false);
  if (has_right_axis) draw_y_ticks(right_axis, right_scale, true);

  set_font(cr, kLabelSize);
  const double middle_y = area.top + area.height / 2.0;
  draw_text(cr, chart.x_label, area.left + area.width / 2.0, height - kMargin - label_height / 2.0, Align::kCenter);
  draw_vertical_text(cr, chart.left_label, kMargin + label_height / 2.0, middle_y);
  if (has_right_axis)
    draw_vertical_text(
        cr, chart.right_label,
        area.left + area.width + kTickLength + kGap + std::ceil(right_axis.label_width) + kGap + label_height / 2.0,
        middle_y);
  if (!chart.title.empty()) {
    set_font(cr, kTitleSize, true);
    draw_text(cr, chart.title, area.left, kMargin + title_height / 2.0, Align::kStart);
  }

  if (legend_column > 0) {
    const LegendLayout legend =
        layout_legend(chart, width - kMargin - legend_column, area.top, legend_column, area.height);
    draw_legend(cr, chart, legend);
    layout.legend = legend.box;
  }
  return layout;
}

void check_written(cairo_status_t status, const std::string& path) {
  if (status != CAIRO_STATUS_SUCCESS)
    throw std::runtime_error(fmt::format("cannot write {}: {}", path, cairo_status_to_string(status)));
}

}  // namespace

Rgb palette_color(size_t index) {
  // Tableau 10 without its grey, which the axes and the legend's key use, and with a dark blue.
  static constexpr std::array<Rgb, 10> kPalette{{{0.122, 0.467, 0.706},
                                                 {1.000, 0.498, 0.055},
                                                 {0.173, 0.627, 0.173},
                                                 {0.839, 0.153, 0.157},
                                                 {0.580, 0.404, 0.741},
                                                 {0.549, 0.337, 0.294},
                                                 {0.890, 0.467, 0.761},
                                                 {0.737, 0.741, 0.133},
                                                 {0.090, 0.745, 0.812},
                                                 {0.100, 0.150, 0.450}}};
  return kPalette[index % kPalette.size()];
}

AxisTicks nice_ticks(double low, double high, int target_count) {
  if (!(high > low)) {  // one value: a span around it
    const double half_span = low == 0 ? 1 : std::abs(low) * 0.1;
    low -= half_span;
    high += half_span;
  }
  const double raw_step = (high - low) / std::max(1, target_count);
  int exponent = static_cast<int>(std::floor(std::log10(raw_step)));
  const double normalized = raw_step / std::pow(10.0, exponent);
  double factor = 10;
  for (double candidate : {1.0, 2.0, 2.5, 5.0})
    if (normalized <= candidate * (1 + 1e-9)) {
      factor = candidate;
      break;
    }
  if (factor == 10) {
    factor = 1;
    ++exponent;
  }
  const double step = factor * std::pow(10.0, exponent);
  const double first = std::floor(low / step + 1e-9);
  const double last = std::ceil(high / step - 1e-9);
  AxisTicks ticks;
  for (double i = first; i <= last; ++i) ticks.values.push_back(std::abs(i) < 0.5 ? 0.0 : i * step);
  ticks.decimals = std::max(0, -exponent + (factor == 2.5 ? 1 : 0));
  return ticks;
}

std::optional<ImageFormat> image_format_of(std::string_view path) {
  std::string extension = std::filesystem::path(path).extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (extension == ".png") return ImageFormat::kPng;
  if (extension == ".svg") return ImageFormat::kSvg;
  return std::nullopt;
}

ChartLayout render_chart(const LineChart& chart, const std::string& path, ImageFormat format, int width, int height) {
  SurfaceHandle surface(format == ImageFormat::kPng ? cairo_image_surface_create(CAIRO_FORMAT_ARGB32, width, height)
                                                    : cairo_svg_surface_create(path.c_str(), width, height),
                        &cairo_surface_destroy);
  check_written(cairo_surface_status(surface.get()), path);
  ContextHandle context(cairo_create(surface.get()), &cairo_destroy);
  const ChartLayout layout = draw_chart(context.get(), chart, width, height);
  check_written(cairo_status(context.get()), path);
  if (format == ImageFormat::kPng) check_written(cairo_surface_write_to_png(surface.get(), path.c_str()), path);
  cairo_surface_finish(surface.get());  // the SVG is written here
  check_written(cairo_surface_status(surface.get()), path);
  return layout;
}

}  // namespace trainctl
