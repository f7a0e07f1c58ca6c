// `chorus report` (docs/report.md): the page workflows::reportPage builds,
// written to a file.
#include <fmt/core.h>

#include "core/io.h"
#include "tools/chorus/commands.h"
#include "workflows/report_page.h"

namespace chorus::cli {

int runReport(const ReportArgs& args) {
  std::string html, error;
  int rc = reportPage(args, {}, &html, &error);
  if (rc == 0) {
    Status st = writeTextFile(html, args.output);
    if (!st.isOk()) {
      error = st.message();
      rc = 2;
    }
  }
  if (rc != 0) {
    fmt::print(stderr, "chorus report: {}\n", error);
    return rc;
  }
  fmt::print("report written to {}\n", args.output);
  return 0;
}

}  // namespace chorus::cli
