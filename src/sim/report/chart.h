// Inline SVG line charts for the simulator's self-contained HTML pages (the event simulator's
// report and the packing protocol's): no script, no network, fixed-precision numbers so that the
// same data give the same bytes.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace baton::sim {

struct ChartSeries {
  std::string name;
  std::vector<std::pair<double, double>> points;  // (x, y)
};

// `s` with <, >, & and " escaped for HTML text and attributes.
std::string HtmlEscape(std::string_view s);

// An axis label a person reads at a glance, never in e-notation: 0.25, 12.5, 4,370, 1.2 M.
std::string TickLabel(double v);

// A line chart as inline SVG, one colour per series with a legend. log_x: logarithmic x axis
// (values below 1 are drawn at 1); y_max: the top of the y axis, 0 for 5 % above the largest
// value.
std::string LineChart(std::string_view title, std::string_view x_label, std::string_view y_label,
                      const std::vector<ChartSeries>& series, bool log_x, double y_max = 0);

}  // namespace baton::sim
