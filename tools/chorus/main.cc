// The `chorus` command line: one binary, one subcommand per job. Thin: the
// work happens in the libraries; see commands.cc.
#include <CLI/CLI.hpp>

#include "tools/chorus/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"Chorus: programmable collective communication (verify, show, convert)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "chorus 0.1.0");

  chorus::cli::VerifyArgs verify;
  auto* v =
      app.add_subcommand("verify", "prove algorithm files correct, or say where they are wrong");
  v->add_option("files", verify.files, "algorithm files (MSCCL XML or Chorus JSON)")->required();
  v->add_flag("--json", verify.json, "print machine-readable results");
  v->add_flag("--target-msccl,--msccl", verify.targetMsccl,
              "treat MSCCL executor limits (W5xx) as errors");
  v->add_option("--spec", verify.spec, "post-condition JSON for a custom collective")
      ->check(CLI::ExistingFile);
  v->add_option("--max-diagnostics", verify.maxDiagnostics, "diagnostics shown per file (text)")
      ->check(CLI::NonNegativeNumber);
  std::string target;
  v->add_option("--target", target, "compatibility target: 'msccl' = the MSCCL executor")
      ->check(CLI::IsMember({"msccl", "chorus"}));

  std::string showFile;
  auto* s = app.add_subcommand("show", "summarize an algorithm: threadblocks, steps, peers, links");
  s->add_option("file", showFile, "algorithm file")->required();

  chorus::cli::ConvertArgs convert;
  auto* c = app.add_subcommand("convert", "convert XML <-> JSON, or XML -> normalized XML");
  c->add_option("input", convert.input, "algorithm file")->required();
  c->add_option("-o,--output", convert.output, "output file ('-' = stdout)")->required();
  c->add_option("--to", convert.to, "output format (default: from the output's extension)")
      ->check(CLI::IsMember({"xml", "json"}));

  std::string code;
  auto* e = app.add_subcommand("explain", "list diagnostic codes, or explain one");
  e->add_option("code", code, "a code such as E110 or its name (offset-range)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& err) {
    return app.exit(err) == 0 ? 0 : 2;
  }
  if (*v) {
    verify.targetMsccl = verify.targetMsccl || target == "msccl";
    return chorus::cli::runVerify(verify);
  }
  if (*s) return chorus::cli::runShow(showFile);
  if (*c) return chorus::cli::runConvert(convert);
  if (*e) return chorus::cli::runExplain(code);
  return 2;
}
