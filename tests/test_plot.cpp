// Tests for trainctl plot: the chart (cli/plot/line_chart.cpp) renders a PNG of the requested size
// whose series are drawn inside the plot area and nowhere else but the legend, and an SVG; the
// metrics history (cli/loss_plot.cpp) keeps the last value per step across a resume.
#include <doctest/doctest.h>

#include <stdlib.h>

#include <cairo.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "errors.h"
#include "line_chart.h"
#include "loss_plot.h"

namespace {

namespace fs = std::filesystem;
using trainctl::Rgb;

class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::temp_directory_path() / "trainctl-plot-XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    path_ = pattern;
  }
  ~TempDir() { fs::remove_all(path_); }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// A falling loss on the left axis and a rising learning rate on the right, thick enough that
// the lines' middles are drawn in their exact colours.
trainctl::LineChart two_series_chart() {
  trainctl::LineChart chart{"a run", "step", "loss", "learning rate", {}, {}};
  trainctl::Series loss{{}, {trainctl::palette_color(0), 3.0}, trainctl::YAxis::kLeft, false};
  trainctl::Series lr{{}, {trainctl::palette_color(3), 3.0}, trainctl::YAxis::kRight, false};
  for (int step = 0; step <= 100; step += 10) {
    loss.points.push_back({static_cast<double>(step), 2.0 * std::exp(-step / 40.0)});
    lr.points.push_back({static_cast<double>(step), 1e-3 * step / 100.0});
  }
  chart.series = {loss, lr};
  chart.legend = {{"training loss", loss.style, false}, {"learning rate", lr.style, false}};
  return chart;
}

struct PixelCounts {
  int inside = 0;  // in the plot area
  int in_legend = 0;
  int elsewhere = 0;
};

bool near(const Rgb& color, uint32_t pixel) {
  const auto channel = [&](int shift, double expected) {
    return std::abs(static_cast<int>((pixel >> shift) & 0xff) - static_cast<int>(std::lround(expected * 255))) <= 3;
  };
  return channel(16, color.red) && channel(8, color.green) && channel(0, color.blue);
}

PixelCounts count_pixels(cairo_surface_t* image, const Rgb& color, const trainctl::ChartLayout& layout) {
  PixelCounts counts;
  const unsigned char* data = cairo_image_surface_get_data(image);
  const int stride = cairo_image_surface_get_stride(image);
  for (int y = 0; y < cairo_image_surface_get_height(image); ++y)
    for (int x = 0; x < cairo_image_surface_get_width(image); ++x) {
      const uint32_t pixel = *reinterpret_cast<const uint32_t*>(data + y * stride + x * 4);
      if (!near(color, pixel)) continue;
      if (layout.plot_area.contains(x, y))
        ++counts.inside;
      else if (layout.legend.contains(x, y))
        ++counts.in_legend;
      else
        ++counts.elsewhere;
    }
  return counts;
}

}  // namespace

TEST_CASE("a PNG of the requested size, each series drawn inside the plot area and in the legend only") {
  TempDir dir;
  const trainctl::LineChart chart = two_series_chart();
  const std::string path = dir.file("chart.png");
  const trainctl::ChartLayout layout = trainctl::render_chart(chart, path, trainctl::ImageFormat::kPng, 640, 360);

  std::unique_ptr<cairo_surface_t, decltype(&cairo_surface_destroy)> image(
      cairo_image_surface_create_from_png(path.c_str()), &cairo_surface_destroy);
  REQUIRE(cairo_surface_status(image.get()) == CAIRO_STATUS_SUCCESS);
  CHECK(cairo_image_surface_get_width(image.get()) == 640);
  CHECK(cairo_image_surface_get_height(image.get()) == 360);
  CHECK(layout.plot_area.width > 320);
  CHECK(layout.plot_area.height > 200);
  for (const trainctl::Series& series : chart.series) {
    const PixelCounts counts = count_pixels(image.get(), series.style.color, layout);
    CAPTURE(counts.inside);
    CAPTURE(counts.in_legend);
    CHECK(counts.inside > layout.plot_area.width);  // a line across the whole area, 3 pixels thick
    CHECK(counts.in_legend > 0);
    CHECK(counts.elsewhere == 0);
  }
}

TEST_CASE("an SVG is written by its extension") {
  TempDir dir;
  const std::string path = dir.file("chart.svg");
  REQUIRE(trainctl::image_format_of(path) == trainctl::ImageFormat::kSvg);
  trainctl::render_chart(two_series_chart(), path, trainctl::ImageFormat::kSvg, 640, 360);
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  CHECK(text.str().find("<svg") != std::string::npos);
  CHECK(text.str().find("width=\"640pt\" height=\"360pt\"") != std::string::npos);
  CHECK(trainctl::image_format_of("a/loss.PNG") == trainctl::ImageFormat::kPng);
  CHECK_FALSE(trainctl::image_format_of("loss.jpg"));
  CHECK_FALSE(trainctl::image_format_of("loss"));
}

TEST_CASE("nice ticks cover the range in steps of 1, 2, 2.5 or 5 times a power of ten") {
  const trainctl::AxisTicks steps = trainctl::nice_ticks(25, 1500, 6);
  CHECK(steps.values == std::vector<double>{0, 250, 500, 750, 1000, 1250, 1500});
  CHECK(steps.decimals == 0);
  const trainctl::AxisTicks losses = trainctl::nice_ticks(0.31, 2.7, 6);
  CHECK(losses.values == std::vector<double>{0.0, 0.5, 1.0, 1.5, 2.0, 2.5, 3.0});
  CHECK(losses.decimals == 1);
  const trainctl::AxisTicks constant = trainctl::nice_ticks(0.001, 0.001, 6);  // a constant learning rate
  CHECK(constant.values.front() < 0.001);
  CHECK(constant.values.back() > 0.001);
  CHECK(constant.decimals == 5);
}

TEST_CASE("the metrics history keeps the last value per step across a resume, and no loss is an error") {
  TempDir dir;
  const trainctl::RunDir run(dir.file("run"));
  fs::create_directories(run.path());
  std::ofstream(run.metrics()) << R"({"step":0,"event":"start","detail":"1 rank"}
{"step":10,"loss":2.0,"lr":0.001}
{"step":20,"loss":1.5,"lr":0.001}
{"step":20,"val_loss":1.7}
{"step":30,"loss":1.2,"lr":0.001}
{"step":20,"event":"resume","detail":"from step 20"}
{"step":30,"loss":1.1,"lr":0.001}
{"step":40,"loss":null,"lr":0.001}
{"step":40,"lo)";
  const trainctl::MetricsHistory history = trainctl::read_metrics_history(run);
  CHECK(history.loss == std::map<int64_t, double>{{10, 2.0}, {20, 1.5}, {30, 1.1}});
  CHECK(history.val_loss == std::map<int64_t, double>{{20, 1.7}});
  CHECK(history.lr.size() == 4);
  const trainctl::LineChart chart = trainctl::run_loss_chart(run, "run");
  CHECK(chart.series.size() == 3);
  CHECK(chart.series[2].axis == trainctl::YAxis::kRight);

  std::ofstream(run.metrics(), std::ios::trunc) << R"({"step":0,"event":"start","detail":"1 rank"})"
                                                << "\n";
  CHECK_THROWS_AS(trainctl::run_loss_chart(run, "run"), trainctl::UsageError);
}
