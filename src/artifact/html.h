// HTML and inline-SVG building blocks of the build report (build_report_html.cc): escaping,
// tables, and a figure's frame, axes, ticks, legend and <figure> wrapper. Pure functions of
// their arguments; every text argument is escaped where it lands in the markup.
#pragma once

#include <algorithm>
#include <cmath>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::artifact::html {

// & < > " ' as entities.
std::string Esc(std::string_view s);

struct Table {
  std::vector<std::string> header;             // plain text (escaped when rendered)
  std::vector<std::vector<std::string>> rows;  // HTML (cells escape their own text)
  std::string caption;                         // plain text, "" for none
};
std::string RenderTable(const Table& t);

constexpr double kWidth = 960;  // every figure's width in SVG pixels

// The plot area of a figure, in SVG pixels, and the data ranges mapped onto it.
struct Frame {
  double left = 70, top = 40, width = kWidth - 70 - 30, height = 220;
  double x_lo = 0, x_hi = 1, y_lo = 0, y_hi = 1;
  bool log_y = false;  // y_lo / y_hi are log10 of the values
  double X(double x) const { return left + (x - x_lo) / (x_hi - x_lo) * width; }
  double Y(double y) const {
    double v = log_y ? std::log10(y) : y;
    v = std::clamp(v, y_lo, y_hi);
    return top + height - (v - y_lo) / (y_hi - y_lo) * height;
  }
  double bottom() const { return top + height; }
  double right() const { return left + width; }
};

std::string Num(double v);  // one decimal, for coordinates
std::string SvgText(double x, double y, std::string_view text, std::string_view attrs = "");
std::string SvgLine(double x1, double y1, double x2, double y2, std::string_view attrs);
// Opens an <svg> of the given height with the figure's title on top.
std::string SvgOpen(double height, const std::string& title);
// "Nice" linear ticks covering [lo, hi]: about n steps of 1, 2 or 5 times a power of ten.
std::vector<double> NiceTicks(double lo, double hi, int n);
std::string TickLabel(double v);
// The frame's left and bottom lines, y ticks with grid lines and labels, the y title.
std::string YAxis(const Frame& f, const std::string& y_title);
std::string XTitle(const Frame& f, const std::string& x_title, double y);
// A legend row of coloured squares and names, left to right, at height y.
std::string Legend(const std::vector<std::pair<std::string, std::string>>& items, double x,
                   double y);
// <figure id> around an opened <svg> (closed here) and its caption (HTML).
std::string Figure(const std::string& id, const std::string& svg, const std::string& caption);
// A figure with no data: the title, `note` (short) in the picture and `why` as the caption.
std::string EmptyFigure(const std::string& id, const std::string& title, const std::string& note,
                        const std::string& why);

}  // namespace ferry::artifact::html
