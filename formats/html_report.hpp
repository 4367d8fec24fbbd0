#pragma once
// `lcsim report`'s page: one self-contained HTML file (its script and style inline, nothing loaded from the
// network) that draws the report data of studies/report_data.hpp: the comparison table, the speedup chart (and the
// scaling chart of a sweep), each policy's per-GPU busy / exposed communication / idle time, and a zoomable
// timeline of the winner beside the baseline. Once everything is drawn without an error the page marks its <html>
// element data-lcsim-rendered="ok" ("error" and the message on the page otherwise): what the headless-browser
// test checks.
#include <string>

#include <nlohmann/json.hpp>

namespace lcsim {

/// The page for `data`; the same data gives the same bytes.
std::string report_page(const nlohmann::ordered_json& data);

}  // namespace lcsim
