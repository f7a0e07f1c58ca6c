// The `chorus` command: one binary, one subcommand per job (command_line.cc).
#include "tools/chorus/command_line.h"

int main(int argc, char** argv) {
  chorus::cli::CommandLine cl;
  int rc = chorus::cli::parseCommandLine(argc, argv, &cl);
  return rc >= 0 ? rc : chorus::cli::runCommandLine(cl);
}
