// HTML and inline-SVG building blocks for the build report (html.h).
#include "artifact/html.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace ferry::artifact::html {

std::string Esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// ---- tables ----

std::string RenderTable(const Table& t) {
  std::string s = "<table>";
  if (!t.caption.empty()) s += "<caption>" + Esc(t.caption) + "</caption>";
  s += "<thead><tr>";
  for (const auto& h : t.header) s += "<th>" + Esc(h) + "</th>";
  s += "</tr></thead><tbody>\n";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (const auto& c : row) s += "<td>" + c + "</td>";
    s += "</tr>\n";
  }
  return s + "</tbody></table>\n";
}

// ---- SVG ----

std::string Num(double v) {
  return fmt::format("{:.1f}", v);
}

std::string SvgText(double x, double y, std::string_view text, std::string_view attrs) {
  return fmt::format("<text x=\"{}\" y=\"{}\"{}{}>{}</text>", Num(x), Num(y),
                     attrs.empty() ? "" : " ", attrs, Esc(text));
}

std::string SvgLine(double x1, double y1, double x2, double y2, std::string_view attrs) {
  return fmt::format("<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" {}/>", Num(x1), Num(y1),
                     Num(x2), Num(y2), attrs);
}

// Opens an <svg> of the given height with the figure's title on top.
std::string SvgOpen(double height, const std::string& title) {
  return fmt::format(
             "<svg viewBox=\"0 0 {0} {1}\" width=\"{0}\" height=\"{1}\" role=\"img\" "
             "aria-label=\"{2}\"><title>{2}</title>",
             Num(kWidth), Num(height), Esc(title)) +
         SvgText(kWidth / 2, 22, title, "class=\"title\" text-anchor=\"middle\"");
}

// "Nice" linear ticks covering [lo, hi]: about n steps of 1, 2 or 5 times a power of ten.
std::vector<double> NiceTicks(double lo, double hi, int n) {
  std::vector<double> ticks;
  if (!(hi > lo)) return {lo};
  double raw = (hi - lo) / n, mag = std::pow(10, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  for (double t = std::ceil(lo / step) * step; t <= hi + step * 1e-9; t += step)
    ticks.push_back(std::fabs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

std::string TickLabel(double v) {
  return fmt::format("{:g}", v);
}

// Axes: the frame's left and bottom lines, y ticks with grid lines and labels, the axis titles.
// x ticks are drawn by each figure (categories or values).
std::string YAxis(const Frame& f, const std::string& y_title) {
  std::string s;
  std::vector<double> ticks;
  if (f.log_y) {
    for (double d = std::ceil(f.y_lo); d <= f.y_hi + 1e-9; ++d) ticks.push_back(std::pow(10, d));
  } else {
    ticks = NiceTicks(f.y_lo, f.y_hi, 5);
  }
  for (double t : ticks) {
    double y = f.Y(t);
    s += SvgLine(f.left, y, f.right(), y, "class=\"grid\"");
    s += SvgText(f.left - 6, y + 4, TickLabel(t), "class=\"tick\" text-anchor=\"end\"");
  }
  s += SvgLine(f.left, f.top, f.left, f.bottom(), "class=\"axis\"");
  s += SvgLine(f.left, f.bottom(), f.right(), f.bottom(), "class=\"axis\"");
  s += fmt::format(
      "<text class=\"label\" text-anchor=\"middle\" transform=\"translate(16 {}) rotate(-90)\">{}"
      "</text>",
      Num(f.top + f.height / 2), Esc(y_title));
  return s;
}

std::string XTitle(const Frame& f, const std::string& x_title, double y) {
  return SvgText(f.left + f.width / 2, y, x_title, "class=\"label\" text-anchor=\"middle\"");
}

// A legend row of coloured squares and names, left to right, at height y.
std::string Legend(const std::vector<std::pair<std::string, std::string>>& items, double x,
                   double y) {
  std::string s;
  for (const auto& [colour, name] : items) {
    s += fmt::format("<rect x=\"{}\" y=\"{}\" width=\"10\" height=\"10\" fill=\"{}\"/>", Num(x),
                     Num(y - 9), colour);
    s += SvgText(x + 14, y, name, "class=\"tick\"");
    x += 24 + 7.0 * static_cast<double>(std::min<size_t>(name.size(), 40));
  }
  return s;
}

std::string Figure(const std::string& id, const std::string& svg, const std::string& caption) {
  return fmt::format("<figure id=\"{}\">\n{}</svg>\n<figcaption>{}</figcaption>\n</figure>\n", id,
                     svg, caption);
}

// A figure with no data: the title, `note` (short) in the picture and `why` as the caption.
std::string EmptyFigure(const std::string& id, const std::string& title, const std::string& note,
                        const std::string& why) {
  std::string svg = SvgOpen(80, title);
  svg += SvgText(kWidth / 2, 56, note, "class=\"note\" text-anchor=\"middle\"");
  return Figure(id, svg, Esc(why));
}

}  // namespace ferry::artifact::html
