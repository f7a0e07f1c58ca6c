// The report's data (src/report): what the page draws must be what the
// algorithm, the simulator and the CSVs hold. The browser test
// (report_browser_test.py) checks the drawing itself.
#include "report/report.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ir/json_io.h"
#include "algorithms/classic.h"
#include "topo/presets.h"

namespace chorus {
namespace {

using json = nlohmann::json;

report::AlgorithmInput input(const std::string& path) {
  ir::ReadResult rr = ir::readAlgorithmFile(path);
  return report::AlgorithmInput{path, std::move(rr.algorithm), std::move(rr.diagnostics)};
}

topo::Topology preset(const std::string& name) {
  auto t = topo::makePreset(name);
  EXPECT_TRUE(t.isOk()) << t.status().toString();
  return t.isOk() ? t.value() : topo::Topology{};
}

TEST(ReportPerf, ReadsChorusPerfAndPeerCompare) {
  auto mine = report::parsePerfCsv(
      "collective,ranks,size_bytes,count,type,redop,root,oop_time_us,oop_algbw_gbs,"
      "oop_busbw_gbs,oop_busbw_frac_memcpy,oop_wrong,ip_time_us,ip_algbw_gbs,ip_busbw_gbs,"
      "ip_busbw_frac_memcpy,ip_wrong,memcpy_gbs\n"
      "allreduce,4,1024,256,fp32,sum,-1,16.8,0.06,0.09,0.0046,,101.1,0.01,0.015,0.0008,,19.5\n"
      "allreduce,4,16384,4096,fp32,sum,-1,80.2,0.2,0.31,0.0155,,24.0,0.68,1.03,0.05,,20.5\n",
      "mine.csv");
  ASSERT_TRUE(mine.isOk()) << mine.status().toString();
  ASSERT_EQ(mine.value().series.size(), 2u);
  EXPECT_EQ(mine.value().series[0].implementation, "chorus");
  EXPECT_EQ(mine.value().series[1].implementation, "chorus in place");
  EXPECT_EQ(mine.value().series[0].collective, "allreduce");
  EXPECT_EQ(mine.value().series[0].ranks, 4);
  ASSERT_EQ(mine.value().series[1].points.size(), 2u);
  EXPECT_EQ(mine.value().series[1].points[1], std::make_pair(16384.0, 1.03));
  EXPECT_DOUBLE_EQ(mine.value().memcpyGBs, 20.0);

  // Two collectives, a peer not measured in some rows (Gloo's empty cells).
  auto peer = report::parsePerfCsv(
      "collective,ranks,size_bytes,chorus_us,mpi_us,gloo_us,vs_mpi,vs_gloo,chorus_busbw,"
      "mpi_busbw,gloo_busbw,chorus_frac_memcpy,memcpy_gbs,socket_gbs,chorus_frac_socket\n"
      "sendrecv,2,4096,9.5,6.7,,0.70,,0.431,0.615,,0.019,22.32,,\n"
      "allreduce,2,4096,3.4,2.8,2110.1,0.82,618.43,1.2,1.458,0.002,0.068,17.70,3.9,0.8\n"
      "allreduce,2,16384,4.2,15.6,375.1,3.74,90.11,3.937,1.053,0.044,0.180,21.81,,\n",
      "peer.csv");
  ASSERT_TRUE(peer.isOk()) << peer.status().toString();
  std::map<std::string, size_t> points;
  for (const auto& s : peer.value().series)
    points[s.collective + "/" + s.implementation] = s.points.size();
  EXPECT_EQ(points, (std::map<std::string, size_t>{{"allreduce/chorus", 2},
                                                   {"allreduce/gloo", 2},
                                                   {"allreduce/mpi", 2},
                                                   {"sendrecv/chorus", 1},
                                                   {"sendrecv/mpi", 1}}));
  EXPECT_DOUBLE_EQ(peer.value().socketGBs, 3.9);

  // Runs of other types, ops and roots are curves of their own; the older
  // peer_compare.sh columns (chorus_oop_busbw, mpi_ip_busbw) are read.
  auto runs = report::parsePerfCsv(
      "collective,ranks,size_bytes,count,type,redop,root,oop_busbw_gbs\n"
      "allreduce,4,1024,256,fp32,sum,-1,1\nallreduce,4,1024,512,bf16,max,-1,2\n"
      "broadcast,4,1024,256,fp32,none,2,3\n",
      "runs.csv");
  ASSERT_TRUE(runs.isOk()) << runs.status().toString();
  std::vector<std::string> names;
  for (const auto& s : runs.value().series) names.push_back(s.collective);
  EXPECT_EQ(names,
            (std::vector<std::string>{"allreduce", "allreduce bf16 max", "broadcast root 2"}));
  auto old = report::parsePerfCsv(
      "collective,ranks,size_bytes,chorus_oop_busbw,mpi_oop_busbw,chorus_ip_busbw,mpi_ip_busbw\n"
      "allreduce,2,4096,1,2,3,4\n",
      "old.csv");
  ASSERT_TRUE(old.isOk()) << old.status().toString();
  std::vector<std::string> impls;
  for (const auto& s : old.value().series) impls.push_back(s.implementation);
  EXPECT_EQ(impls, (std::vector<std::string>{"chorus", "mpi", "chorus in place", "mpi in place"}));
}

TEST(ReportPerf, BadFilesNameTheLine) {
  const std::string header = "collective,ranks,size_bytes,chorus_busbw\n";
  struct Case {
    std::string text, message;
  } cases[] = {
      {header + "allreduce,2,4096,1.5\nallreduce,2,8192\n",
       "bad.csv:3: 3 fields; the header has 4"},
      {header + "allreduce,2,4096,fast\n",
       "bad.csv:2: column chorus_busbw: 'fast' is not a number"},
      {header + "allreduce,2,4K,1.5\n", "bad.csv:2: column size_bytes: '4K' is not a number"},
      {"allreduce,2,4096,1.5\n", "bad.csv:1: a row before any header"},
      {"collective,ranks,bytes\n", "bad.csv:1: a header without size_bytes and a busbw column"},
      {header + "allreduce,2,0,1.5\n", "bad.csv:2: size_bytes must be at least 1"},
      {header + "allreduce,2.5,4096,1.5\n", "bad.csv:2: ranks must be a whole number"},
      {header + "allreduce,1e20,4096,1.5\n", "bad.csv:2: ranks must be a whole number"},
      {header, "bad.csv:1: no rows"},
      {"", "bad.csv:0: no rows"},
  };
  for (const Case& c : cases) {
    auto r = report::parsePerfCsv(c.text, "bad.csv");
    ASSERT_FALSE(r.isOk()) << c.text;
    EXPECT_NE(r.status().message().find(c.message), std::string::npos) << r.status().message();
  }
}

// A production file on its topology: every step, threadblock and message
// is in the data, each send paired with a receive on its peer drawn after
// it; the simulation has a time per step and the links' loads.
TEST(ReportData, ProductionFileOnItsTopology) {
  const std::string path = std::string(CHORUS_MSCCL_DIR) + "/ag-1m.xml";
  topo::Topology t = preset("ndv4");
  report::Options o;
  o.topology = &t;
  o.minBytes = 1 << 20;
  o.maxBytes = 1 << 26;
  std::vector<report::AlgorithmInput> in;
  in.push_back(input(path));
  const ir::Algorithm a = *in[0].algorithm;
  json d = report::reportData(in, {}, o);
  const json& j = d["algorithms"][0];
  EXPECT_EQ(j["verdict"], "correct");
  EXPECT_EQ(j["steps"], a.totalSteps());
  const json& f = j["flow"];
  EXPECT_TRUE(f["detailed"].get<bool>());
  ASSERT_EQ(f["tbs"].size(), a.totalThreadblocks());
  ASSERT_EQ(f["steps"].size(), a.totalSteps());
  std::map<int, std::pair<int, int>> rankOf;  // node -> (rank, level)
  std::map<int, int> tbRank;
  for (const json& tb : f["tbs"])
    for (int k = 0; k < tb[6].get<int>(); ++k) tbRank[tb[5].get<int>() + k] = tb[0].get<int>();
  for (const json& s : f["steps"]) rankOf[s[0].get<int>()] = {tbRank[s[0].get<int>()], s[8]};
  size_t sends = 0;
  for (const json& s : f["steps"]) {
    auto type = static_cast<ir::StepType>(s[1].get<int>());
    if (!ir::sends(type)) {
      EXPECT_EQ(s[9], -1);
      continue;
    }
    ++sends;
    int recv = s[9];
    ASSERT_GE(recv, 0) << "a send without its receive";
    EXPECT_NE(rankOf[recv].first, rankOf[s[0].get<int>()].first);
    EXPECT_GT(rankOf[recv].second, s[8].get<int>()) << "a receive drawn before its send";
  }
  EXPECT_GT(sends, 0u);
  const json& m = j["sim"];
  ASSERT_FALSE(m.contains("error")) << m["error"];
  EXPECT_EQ(m["steps"].size(), a.totalSteps());
  EXPECT_FALSE(m["critical"].empty());
  EXPECT_EQ(m["link_bytes"].size(), t.links.size());
  EXPECT_EQ(m["timeline"]["buckets"], o.timelineBuckets);
  for (const auto& [link, row] : m["timeline"]["links"].items()) {
    EXPECT_EQ(row.size(), static_cast<size_t>(o.timelineBuckets));
    for (double u : row) EXPECT_TRUE(u >= 0 && u <= 1) << link;
  }
  EXPECT_EQ(m["curve"].size(), 4u);  // 1M, 4M, 16M, 64M
  EXPECT_GT(m["bound"]["busbw"].get<double>(), m["busbw"].get<double>());
  EXPECT_EQ(d["topology"]["nodes"].size(), t.nodes.size());
}

// Past detailSteps only the chosen ranks' steps are listed; the traffic
// matrix covers every rank (a ring: each rank to the next).
TEST(ReportData, LargeAlgorithmsAreAggregated) {
  const int n = 16;
  report::Options o;
  o.detailSteps = 100;
  o.detailRanks = {0, 5};
  std::vector<report::AlgorithmInput> in(1);
  in[0].label = "ring";
  in[0].algorithm = algorithms::ringAllReduce(n);
  const ir::Algorithm& a = *in[0].algorithm;
  json d = report::reportData(in, {}, o);
  const json& f = d["algorithms"][0]["flow"];
  EXPECT_FALSE(f["detailed"].get<bool>());
  size_t mine = 0;
  for (int r : {0, 5})
    for (const ir::Threadblock& tb : a.ranks[static_cast<size_t>(r)].tbs) mine += tb.steps.size();
  EXPECT_EQ(f["steps"].size(), mine);
  ASSERT_EQ(f["matrix"].size(), static_cast<size_t>(n));
  for (const json& cell : f["matrix"]) EXPECT_EQ(cell[1], (cell[0].get<int>() + 1) % n);
  EXPECT_FALSE(d["algorithms"][0].contains("sim"));  // no topology given
}

// A wrong file keeps its findings, each with its site, and is not
// simulated; an unreadable one keeps the reader's.
TEST(ReportData, WrongAndUnreadableFilesSaySo) {
  topo::Topology t = preset("ring:4");
  report::Options o;
  o.topology = &t;
  std::vector<report::AlgorithmInput> in;
  in.push_back(input(std::string(CHORUS_SOURCE_DIR) + "/tests/data/bad/e301_swapped_offsets.xml"));
  in.push_back(input(std::string(CHORUS_SOURCE_DIR) + "/tests/data/bad/e001_truncated.xml"));
  json d = report::reportData(in, {}, o);
  const json& wrong = d["algorithms"][0];
  EXPECT_EQ(wrong["verdict"], "wrong");
  ASSERT_EQ(wrong["diagnostics"].size(), 2u);
  EXPECT_EQ(wrong["diagnostics"][0]["code"], "E301");
  EXPECT_EQ(wrong["diagnostics"][0]["rank"], 1);
  EXPECT_EQ(wrong["diagnostics"][0]["tb"], 0);
  EXPECT_EQ(wrong["diagnostics"][0]["step"], 1);
  EXPECT_TRUE(wrong["sim"].contains("error"));
  const json& unreadable = d["algorithms"][1];
  EXPECT_EQ(unreadable["verdict"], "unreadable");
  EXPECT_EQ(unreadable["diagnostics"][0]["code"], "E001");
  EXPECT_FALSE(unreadable.contains("flow"));
}

// The page inlines the data so that no label can end its script element
// early or open a comment in it, and escapes the title.
TEST(ReportHtml, DataCannotCloseItsScript) {
  json d;
  d["title"] = "a <b> & c";
  d["algorithms"] = json::array({json{{"label", "x</script><script>alert(1)</script>"}}});
  d["algorithms"].push_back(json{{"label", "<!--<script>"}});
  std::string html = report::renderHtml(d);
  EXPECT_EQ(html.find("</script><script>alert"), std::string::npos);
  EXPECT_EQ(html.find("<!--"), std::string::npos);
  EXPECT_NE(html.find("\\u003c/script\\u003e\\u003cscript\\u003ealert(1)"), std::string::npos);
  EXPECT_NE(html.find("<title>a &lt;b> &amp; c</title>"), std::string::npos);
  const size_t open = html.find("id=\"chorus-data\">") + 17;
  const size_t close = html.find("</script>", open);
  json back = json::parse(html.substr(open, close - open));
  EXPECT_EQ(back, d);
  EXPECT_NE(html.find("data-ready"), std::string::npos);  // the viewer is inlined
}

}  // namespace
}  // namespace chorus
