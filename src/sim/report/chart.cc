#include "sim/report/chart.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace baton::sim {
namespace {

constexpr std::string_view kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                        "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string Num(double v) { return fmt::format("{:.2f}", v); }

}  // namespace

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

std::string TickLabel(double v) {
  const double a = std::abs(v);
  auto trim = [](std::string s) {
    if (s.find('.') != std::string::npos) {
      while (s.ends_with('0')) s.pop_back();
      if (s.ends_with('.')) s.pop_back();
    }
    return s;
  };
  if (a >= 1e9) return trim(fmt::format("{:.1f}", v / 1e9)) + " G";
  if (a >= 1e6) return trim(fmt::format("{:.1f}", v / 1e6)) + " M";
  if (a >= 1e3) {
    std::string digits = fmt::format("{:.0f}", a);
    for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3) digits.insert(i, ",");
    return (v < 0 ? "-" : "") + digits;
  }
  if (a >= 100) return fmt::format("{:.0f}", v);
  if (a >= 0.01 || a == 0) return trim(fmt::format("{:.2f}", v));
  return trim(fmt::format("{:.4f}", v));
}

std::string LineChart(std::string_view title, std::string_view x_label, std::string_view y_label,
                      const std::vector<ChartSeries>& series, bool log_x, double y_max) {
  constexpr double kW = 640, kH = 320, kL = 60, kR = 130, kT = 30, kB = 45;
  auto fx = [&](double x) { return log_x ? std::log10(std::max(x, 1.0)) : x; };
  double x0 = 1e300, x1 = -1e300, y1 = 0;
  for (const auto& s : series) {
    for (auto [x, y] : s.points) {
      x0 = std::min(x0, fx(x));
      x1 = std::max(x1, fx(x));
      y1 = std::max(y1, y);
    }
  }
  if (x0 > x1) x0 = 0, x1 = 1;
  if (x1 <= x0) x1 = x0 + 1;
  if (y1 <= 0) y1 = 1;
  y1 = y_max > 0 ? y_max : y1 * 1.05;
  auto px = [&](double x) { return kL + (fx(x) - x0) / (x1 - x0) * (kW - kL - kR); };
  auto py = [&](double y) { return kT + (1 - y / y1) * (kH - kT - kB); };
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"11\">\n"
      "<text x=\"{2}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{3}</text>\n"
      "<rect x=\"{4}\" y=\"{5}\" width=\"{6}\" height=\"{7}\" fill=\"none\" stroke=\"#999\"/>\n",
      kW, kH, kL, HtmlEscape(title), kL, kT, kW - kL - kR, kH - kT - kB);
  for (int i = 0; i <= 4; ++i) {
    const double y = y1 * i / 4;
    const double xv = x0 + (x1 - x0) * i / 4;
    const double xlabel = log_x ? std::pow(10.0, xv) : xv;
    svg += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n"
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n",
        Num(kL - 4), Num(py(y) + 4), TickLabel(y), Num(kL + (kW - kL - kR) * i / 4),
        Num(kH - kB + 14), TickLabel(xlabel));
  }
  svg += fmt::format(
      "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n"
      "<text x=\"12\" y=\"{}\" text-anchor=\"middle\" transform=\"rotate(-90 12 {})\">{}</text>\n",
      Num(kL + (kW - kL - kR) / 2), Num(kH - 8), HtmlEscape(x_label), Num(kT + (kH - kT - kB) / 2),
      Num(kT + (kH - kT - kB) / 2), HtmlEscape(y_label));
  for (std::size_t i = 0; i < series.size(); ++i) {
    const auto color = kColors[i % std::size(kColors)];
    std::string pts;
    for (auto [x, y] : series[i].points) {
      if (!pts.empty()) pts += ' ';
      pts += Num(px(x)) + "," + Num(py(y));
    }
    svg += fmt::format(
        "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>\n"
        "<rect x=\"{}\" y=\"{}\" width=\"12\" height=\"3\" fill=\"{}\"/>"
        "<text x=\"{}\" y=\"{}\">{}</text>\n",
        color, pts, Num(kW - kR + 10), Num(kT + 10 + 16 * i), color, Num(kW - kR + 26),
        Num(kT + 14 + 16 * i), HtmlEscape(series[i].name));
  }
  return svg + "</svg>\n";
}

}  // namespace baton::sim
