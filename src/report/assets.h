// The report viewer's script and style (src/report/assets), embedded at
// build time by embed.cmake so a report fetches nothing when it is opened.
#pragma once

#include <string_view>

namespace chorus::report {

extern const std::string_view kReportJs;
extern const std::string_view kReportCss;

}  // namespace chorus::report
