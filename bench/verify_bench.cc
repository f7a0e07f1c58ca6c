// Parse and verify time of each production MSCCL algorithm
// (../shared/msccl-algorithms/ndv4). Goal (issue 2): ap4ll.xml, the largest,
// parsed and fully verified in under 100 ms. Run:
//   build/release/bench/verify_bench --benchmark_min_time=0.2
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "core/io.h"
#include "ir/xml_reader.h"
#include "verify/verifier.h"

namespace {

void parse(benchmark::State& state, const std::string& text) {
  for (auto _ : state) {
    auto r = chorus::ir::readXml(text, "bench.xml");
    benchmark::DoNotOptimize(r.algorithm);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * text.size()));
}

void verify(benchmark::State& state, const std::string& text) {
  auto r = chorus::ir::readXml(text, "bench.xml");
  if (!r.algorithm) {
    state.SkipWithError("file does not parse");
    return;
  }
  for (auto _ : state) {
    auto rep = chorus::verify::verifyAlgorithm(*r.algorithm);
    if (!rep.correct()) state.SkipWithError("file does not verify");
    benchmark::DoNotOptimize(rep);
  }
  state.counters["steps"] = static_cast<double>(r.algorithm->totalSteps());
}

void parseAndVerify(benchmark::State& state, const std::string& text) {
  for (auto _ : state) {
    auto r = chorus::ir::readXml(text, "bench.xml");
    auto rep = chorus::verify::verifyAlgorithm(*r.algorithm);
    benchmark::DoNotOptimize(rep);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(CHORUS_MSCCL_DIR, ec))
    if (e.path().extension() == ".xml") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  static std::vector<std::string> texts;
  texts.reserve(files.size());
  for (const auto& f : files) {
    chorus::Result<std::string> text = chorus::readTextFile(f);
    if (!text.isOk()) {
      std::fprintf(stderr, "%s\n", text.status().toString().c_str());
      return 1;
    }
    texts.push_back(std::move(text).value());
    std::string name = std::filesystem::path(f).filename().string();
    const std::string* t = &texts.back();
    benchmark::RegisterBenchmark(("parse/" + name).c_str(), [t](benchmark::State& s) {
      parse(s, *t);
    })->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("verify/" + name).c_str(), [t](benchmark::State& s) {
      verify(s, *t);
    })->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark(("parse+verify/" + name).c_str(), [t](benchmark::State& s) {
      parseAndVerify(s, *t);
    })->Unit(benchmark::kMillisecond);
  }
  if (files.empty()) {
    std::fprintf(stderr, "no production algorithms in %s\n", CHORUS_MSCCL_DIR);
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
