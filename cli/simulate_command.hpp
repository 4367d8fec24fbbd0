#pragma once
// `lcsim simulate`'s options and run, shared with `lcsim report SCENARIO`, which simulates the same way.
#include <ostream>
#include <string>

#include <boost/program_options.hpp>

namespace lcsim {

/// `lcsim simulate`'s options; without `with_report`, all but --report (`lcsim report` has --out instead).
boost::program_options::options_description simulate_options(bool with_report = true);

/// Simulates `scenario_file` as `lcsim simulate` does with the parsed options `vm`; a non-empty `report_file` also
/// gets the report page (formats/html_report.hpp), with the simulation's spans (exposed communication, timeline).
void simulate_from_options(const boost::program_options::variables_map& vm, const std::string& scenario_file,
                           const std::string& report_file, std::ostream& out);

}  // namespace lcsim
