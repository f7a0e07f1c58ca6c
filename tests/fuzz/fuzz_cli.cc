// libFuzzer target for the `chorus` command line's parsing (CLI11 with our
// options, checks and the checks after it): the input's NUL-separated
// words are argv[1...]. Nothing runs; no crash, no uncaught exception, no
// sanitizer report, and the answer is a subcommand to run or an exit code
// of 0 (help, version) or 2 (usage error).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tools/chorus/command_line.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::vector<std::string> words{"chorus"};
  std::string word;
  for (size_t i = 0; i < size && words.size() < 32; ++i) {
    if (data[i] == 0) {
      words.push_back(word);
      word.clear();
    } else {
      word.push_back(static_cast<char>(data[i]));
    }
  }
  if (!word.empty() && words.size() < 32) words.push_back(word);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  argv.push_back(nullptr);
  chorus::cli::CommandLine cl;
  int rc = chorus::cli::parseCommandLine(static_cast<int>(words.size()), argv.data(), &cl);
  if (rc == -1 ? cl.command == chorus::cli::CommandLine::Command::kNone : rc != 0 && rc != 2) {
    std::fprintf(stderr, "parseCommandLine answered %d\n", rc);
    std::abort();
  }
  return 0;
}
