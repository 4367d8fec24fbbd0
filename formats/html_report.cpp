#include "formats/html_report.hpp"

#include "report_assets.hpp"

namespace lcsim {
namespace {

/// Text for HTML element content.
std::string escape_html(const std::string& text) {
  std::string out;
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// JSON inside <script type="application/json">: "<" as \u003c so that no string of the data (a policy label,
/// a file name) can close the element; JSON.parse reads it back unchanged.
std::string script_safe_json(const nlohmann::ordered_json& data) {
  const std::string json = data.dump();
  std::string out;
  out.reserve(json.size());
  for (char c : json) {
    if (c == '<')
      out += "\\u003c";
    else
      out += c;
  }
  return out;
}

}  // namespace

std::string report_page(const nlohmann::ordered_json& data) {
  const std::string title = "lcsim report: " + data.value("scenario", std::string("results"));
  std::string page;
  page += "<!DOCTYPE html>\n<html lang=\"en\" data-lcsim-rendered=\"no\">\n<head>\n<meta charset=\"utf-8\">\n";
  page += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  page += "<title>" + escape_html(title) + "</title>\n<style>\n" + report_assets::kStyle + "</style>\n</head>\n";
  page += "<body>\n<h1>" + escape_html(title) + "</h1>\n";
  page += "<noscript>This page draws its tables and charts with JavaScript.</noscript>\n";
  page += "<p id=\"lcsim-status\">drawing...</p>\n<main id=\"report\"></main>\n";
  page += "<script type=\"application/json\" id=\"lcsim-data\">" + script_safe_json(data) + "</script>\n";
  page += "<script>\n" + std::string(report_assets::kScript) + "</script>\n</body>\n</html>\n";
  return page;
}

}  // namespace lcsim
