#include <gtest/gtest.h>

#include <limits>
#include <pugixml.hpp>
#include <sstream>

#include "ir/json_io.h"
#include "ir/validate.h"
#include "ir/xml_reader.h"
#include "ir/xml_writer.h"
#include "tests/support/files.h"
#include "verify/verifier.h"

namespace chorus::ir {
namespace {

using chorus::testing::baseName;
using chorus::testing::mustRead;
using chorus::testing::productionFiles;

// The minimal valid file: 2-rank in-place allreduce of one chunk.
constexpr const char* kPairs = R"(<!-- comment before the root -->
<algo name="p2" proto="Simple" nchannels="1" nchunksperloop="1" ngpus="2" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0">
  <gpu id="0" i_chunks="1" o_chunks="0" s_chunks="1">
    <!-- comments may appear anywhere -->
    <tb id="0" send="1" recv="1" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="-1" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1" i_chunks="1" o_chunks="0" s_chunks="1">
    <tb id="0" send="0" recv="0" chan="0">
      <step s="0" type="s" srcbuf="i" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r" srcbuf="i" srcoff="-1" dstbuf="s" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="2" type="re" srcbuf="s" srcoff="0" dstbuf="i" dstoff="0" cnt="1" depid="-1" deps="-1" hasdep="0"/>
    </tb>
  </gpu>
</algo>
)";

std::string replaceOnce(std::string s, const std::string& from, const std::string& to) {
  size_t p = s.find(from);
  EXPECT_NE(p, std::string::npos) << from;
  if (p != std::string::npos) s.replace(p, from.size(), to);
  return s;
}

TEST(XmlReader, ReadsTheMinimalFile) {
  ReadResult r = readXml(kPairs, "p2.xml");
  ASSERT_TRUE(r.algorithm) << (r.diagnostics.empty() ? "" : r.diagnostics.items()[0].format());
  const Algorithm& a = *r.algorithm;
  EXPECT_EQ(a.ngpus, 2);
  EXPECT_EQ(a.collective, CollectiveKind::kAllReduce);
  EXPECT_TRUE(a.inplace);
  EXPECT_FALSE(a.outofplace);
  EXPECT_FALSE(a.legacyAttributes);
  ASSERT_EQ(a.ranks[1].tbs[0].steps.size(), 3u);
  const Step& s = a.ranks[1].tbs[0].steps[1];
  EXPECT_EQ(s.type, StepType::kRecv);
  EXPECT_EQ(s.dstBuf, Buffer::kScratch);
  EXPECT_EQ(s.pos.line, 14);
  EXPECT_EQ(s.pos.column, 7);
  EXPECT_TRUE(verify::verifyAlgorithm(a).correct());
}

// Read one <gpu> at a time (ReadOptions::chunkedBytes), a file gives the
// same algorithm, positions and diagnostics as read whole.
void expectSameEitherWay(const std::string& text, const std::string& name, bool plain) {
  SCOPED_TRACE(name);
  ReadOptions whole, byGpu;
  whole.chunkedBytes = std::numeric_limits<size_t>::max();
  byGpu.chunkedBytes = 0;
  ReadResult a = readXml(text, name, whole), b = readXml(text, name, byGpu);
  EXPECT_FALSE(a.byGpu);
  EXPECT_EQ(b.byGpu, plain);  // the plain shape is read by <gpu>, anything else whole
  ASSERT_EQ(a.diagnostics.size(), b.diagnostics.size());
  for (size_t i = 0; i < a.diagnostics.size(); ++i)
    EXPECT_EQ(a.diagnostics.items()[i].format(), b.diagnostics.items()[i].format());
  ASSERT_EQ(a.algorithm.has_value(), b.algorithm.has_value());
  if (!a.algorithm) return;
  EXPECT_TRUE(*a.algorithm == *b.algorithm);
  EXPECT_EQ(a.algorithm->pos.line, b.algorithm->pos.line);
  for (size_t r = 0; r < a.algorithm->ranks.size(); ++r) {
    const Rank &x = a.algorithm->ranks[r], &y = b.algorithm->ranks[r];
    EXPECT_EQ(x.pos.line, y.pos.line);
    EXPECT_EQ(x.pos.column, y.pos.column);
    for (size_t t = 0; t < x.tbs.size(); ++t)
      for (size_t s = 0; s < x.tbs[t].steps.size(); ++s) {
        EXPECT_EQ(x.tbs[t].steps[s].pos.line, y.tbs[t].steps[s].pos.line);
        EXPECT_EQ(x.tbs[t].steps[s].pos.column, y.tbs[t].steps[s].pos.column);
      }
  }
}

TEST(XmlReader, OneGpuAtATimeReadsAsTheWholeDocument) {
  for (const std::string& f : productionFiles())
    expectSameEitherWay(chorus::testing::readText(f), baseName(f), true);
  // The plain shape with mistakes in a later <gpu>: positions past the first.
  std::string plain = std::string(kPairs).substr(std::string(kPairs).find("<algo"));
  plain = replaceOnce(plain, "    <!-- comments may appear anywhere -->\n", "");
  expectSameEitherWay(plain, "plain.xml", true);
  std::string bad = plain;
  const size_t gpu1 = bad.find("<gpu id=\"1\"");
  bad = bad.substr(0, gpu1) + replaceOnce(bad.substr(gpu1), "cnt=\"1\"", "cnt=\"x\"");
  bad = replaceOnce(bad,
                    "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n    </tb>\n  </gpu>\n  <gpu id=\"1\"",
                    "depid=\"-1\" deps=\"-1\"/>\n    </tb>\n  </gpu>\n  <gpu id=\"1\"");
  expectSameEitherWay(bad, "bad.xml", true);
  // Not the plain shape (comments, an unknown element, a second root,
  // broken XML): read whole, with the same result.
  expectSameEitherWay(kPairs, "comments.xml", false);
  expectSameEitherWay(replaceOnce(plain, "</algo>", "<note/></algo>"), "unknown.xml", false);
  expectSameEitherWay(plain + "<algo/>", "two-roots.xml", false);
  expectSameEitherWay(replaceOnce(plain, "</gpu>", "</gpux>"), "broken.xml", false);
  // An end tag with anything but blanks after its name is broken XML (a
  // fuzzer finding: the <gpu> reader took `</algo/>` for `</algo>`).
  expectSameEitherWay(replaceOnce(plain, "</algo>", "</algo/>"), "slash-algo.xml", false);
  expectSameEitherWay(replaceOnce(plain, "</gpu>", "</gpu />"), "slash-gpu.xml", false);
  expectSameEitherWay(replaceOnce(plain, "</algo>", "</algo \n>"), "blank-algo.xml", true);
  expectSameEitherWay(plain.substr(0, plain.size() / 2), "truncated.xml", false);
  for (const std::string& f : chorus::testing::sourceFiles("tests/data/bad", ".xml")) {
    const std::string text = chorus::testing::readText(f);
    ReadOptions byGpu;
    byGpu.chunkedBytes = 0;
    const bool plainShape = readXml(text, f, byGpu).byGpu;
    expectSameEitherWay(text, baseName(f), plainShape);
  }
}

TEST(XmlReader, LegacyDialectDefaults) {
  // msccl-tools' older output: no outofplace/minBytes/maxBytes, redop and
  // nthreads present, reduce_scatter spelling accepted, ngpus inferred.
  std::string t = replaceOnce(
      kPairs, R"( ngpus="2" coll="allreduce" inplace="1" outofplace="0" minBytes="0" maxBytes="0")",
      R"( coll="allreduce" inplace="1" redop="sum" nthreads="512")");
  ReadResult r = readXml(t, "legacy.xml");
  ASSERT_TRUE(r.algorithm);
  EXPECT_EQ(r.algorithm->ngpus, 2);
  EXPECT_TRUE(r.algorithm->inplace);
  EXPECT_FALSE(r.algorithm->outofplace);  // missing outofplace means !inplace
  EXPECT_EQ(r.algorithm->maxBytes, 0u);
  EXPECT_TRUE(r.algorithm->legacyAttributes);
  EXPECT_TRUE(r.diagnostics.contains(DiagCode::kLegacyDialect));
  verify::Report rep = verify::verifyAlgorithm(*r.algorithm);
  EXPECT_TRUE(rep.correct());
  EXPECT_TRUE(rep.diagnostics.contains(DiagCode::kLimitAttributes));
  // Written back, it has all ten attributes and no warning.
  ReadResult again = readXml(writeXml(*r.algorithm), "again.xml");
  ASSERT_TRUE(again.algorithm);
  EXPECT_FALSE(again.algorithm->legacyAttributes);
  EXPECT_EQ(*again.algorithm, *r.algorithm);

  std::string rs = replaceOnce(kPairs, R"(coll="allreduce")", R"(coll="reduce_scatter")");
  ReadResult r2 = readXml(rs, "rs.xml");
  ASSERT_TRUE(r2.algorithm);
  EXPECT_EQ(r2.algorithm->collective, CollectiveKind::kReduceScatter);
  EXPECT_EQ(r2.algorithm->collectiveName, "reducescatter");
}

TEST(XmlReader, IgnoresUnknownElementsAndAttributes) {
  std::string t = replaceOnce(kPairs, R"(<tb id="0" send="1" recv="1" chan="0">)",
                              R"(<tb id="0" send="1" recv="1" chan="0" color="blue"><note/>)");
  ReadResult r = readXml(t, "x.xml");
  ASSERT_TRUE(r.algorithm);
  EXPECT_EQ(*r.algorithm, *readXml(kPairs, "p2.xml").algorithm);
}

struct BadCase {
  const char* from;
  const char* to;
  DiagCode code;
  int line;
  int column;
  const char* mention;
};

TEST(XmlReader, ErrorsNameLineAndColumn) {
  const BadCase cases[] = {
      {R"(cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="r")",
       R"(cnt="1" depid="-1" deps="-1" hasdep="0"/>
      <step s="1" type="rx")",
       DiagCode::kBadAttribute, 7, 19, "type"},
      {R"(<step s="2" type="re" srcbuf="s" srcoff="0")",
       R"(<step s="2" type="re" srcbuf="s" srcoff="zero")", DiagCode::kBadAttribute, 8, 40,
       "srcoff"},
      {R"(<step s="2" type="re")", R"(<step s="3" type="re")", DiagCode::kStepPosition, 8, 13,
       "position 2"},
      {R"(<gpu id="1" i_chunks="1" o_chunks="0" s_chunks="1">)",
       R"(<gpu id="1" i_chunks="1" s_chunks="1">)", DiagCode::kMissingAttribute, 11, 3, "o_chunks"},
      {R"(hasdep="0"/>
    </tb>
  </gpu>
  <gpu id="1")",
       R"(hasdep="2"/>
    </tb>
  </gpu>
  <gpu id="1")",
       DiagCode::kBadAttribute, 8, 102, "0 or 1"},
      {R"(proto="Simple")", R"(proto="Fast")", DiagCode::kBadAttribute, 2, 17, "proto"},
      // pugixml reports a mismatched end tag at its name, after "</".
      {"</algo>", "</alg>", DiagCode::kXmlSyntax, 18, 3, "malformed XML"},
  };
  for (const BadCase& c : cases) {
    ReadResult r = readXml(replaceOnce(kPairs, c.from, c.to), "bad.xml");
    EXPECT_FALSE(r.algorithm) << c.to;
    ASSERT_FALSE(r.diagnostics.empty()) << c.to;
    const Diagnostic& d = r.diagnostics.items()[0];
    EXPECT_EQ(d.code, c.code) << d.format();
    EXPECT_EQ(d.loc.file, "bad.xml");
    EXPECT_EQ(d.loc.line, c.line) << d.format();
    EXPECT_EQ(d.loc.column, c.column) << d.format();
    EXPECT_NE(d.message.find(c.mention), std::string::npos) << d.format();
  }
}

TEST(XmlReader, EmptyAndForeignInputs) {
  for (const char* text : {"", "   ", "<algo", "not xml at all", "<?xml version=\"1.0\"?>",
                           "<gpu id=\"0\"/>", "<algo/><algo/>"}) {
    ReadResult r = readXml(text, "odd.xml");
    EXPECT_FALSE(r.algorithm) << text;
    EXPECT_TRUE(r.diagnostics.hasErrors()) << text;
  }
  ReadResult missing = readAlgorithmFile("/nonexistent/file.xml");
  ASSERT_TRUE(missing.diagnostics.hasErrors());
  EXPECT_EQ(missing.diagnostics.items()[0].code, DiagCode::kIoFailure);
  ReadResult dir = readAlgorithmFile("/");
  EXPECT_EQ(dir.diagnostics.items()[0].code, DiagCode::kIoFailure);
}

TEST(XmlReader, RejectsInvalidUtf8InNames) {
  // Found by the fuzzer: a name with a stray continuation byte reached the
  // JSON writer, which cannot encode it.
  std::string t = replaceOnce(kPairs, R"(name="p2")",
                              "name=\"p\xad"
                              "2\"");
  ReadResult r = readXml(t, "utf8.xml");
  EXPECT_FALSE(r.algorithm);
  ASSERT_FALSE(r.diagnostics.empty());
  EXPECT_EQ(r.diagnostics.items()[0].code, DiagCode::kBadAttribute);
  EXPECT_EQ(r.diagnostics.items()[0].loc.column, 7);
  std::string ok = replaceOnce(kPairs, R"(name="p2")",
                               "name=\"p\xc3\xa9"
                               "2\"");  // é
  EXPECT_TRUE(readXml(ok, "utf8.xml").algorithm);
}

TEST(XmlWriter, WritesAllTenAlgoAttributesAndPositions) {
  Algorithm a = *readXml(kPairs, "p2.xml").algorithm;
  std::string out = writeXml(a);
  for (const char* attr : {"name=", "proto=", "nchannels=", "nchunksperloop=", "ngpus=", "coll=",
                           "inplace=", "outofplace=", "minBytes=", "maxBytes="}) {
    EXPECT_NE(out.find(attr), std::string::npos) << attr;
  }
  EXPECT_NE(out.find(R"(<step s="2" type="re")"), std::string::npos);
}

// Chorus's own sliceBytes: read, written only where set (MSCCL's files
// stay as they were), checked, and named as MSCCL's executor ignores it.
// `a` reads back the same from its XML and its JSON.
void expectRoundTrips(const Algorithm& a) {
  ReadResult back = readXml(writeXml(a), "back.xml");
  ASSERT_TRUE(back.algorithm);
  EXPECT_EQ(*back.algorithm, a);
  ReadResult json = readJson(writeJson(a), "back.json");
  ASSERT_TRUE(json.algorithm);
  EXPECT_EQ(*json.algorithm, a);
}

// The one executor finding `a` has: `code`, a warning MSCCL's executor
// still runs the file under (not a limit), whose message says `says`.
Diagnostic onlyExecutorFinding(const Algorithm& a, DiagCode code, const std::string& says) {
  DiagnosticList limits;
  checkExecutorLimits(a, limits);
  EXPECT_EQ(limits.items().size(), 1u);
  if (limits.items().empty()) return {};
  const Diagnostic& d = limits.items()[0];
  EXPECT_EQ(d.code, code);
  EXPECT_FALSE(isExecutorLimit(code));
  EXPECT_NE(d.message.find(says), std::string::npos) << d.message;
  return d;
}

TEST(XmlReader, ReadsWritesAndChecksTheSliceChorusPipelinesBy) {
  Algorithm plain = *readXml(kPairs, "p2.xml").algorithm;
  EXPECT_EQ(plain.sliceBytes, 0u);
  EXPECT_EQ(writeXml(plain).find("sliceBytes"), std::string::npos);
  EXPECT_EQ(sliceBytesOf(plain), defaultSliceBytes(Protocol::kSimple));

  ReadResult r = readXml(
      replaceOnce(kPairs, R"(maxBytes="0")", R"(maxBytes="0" sliceBytes="65536")"), "sliced.xml");
  ASSERT_TRUE(r.algorithm);
  EXPECT_FALSE(r.diagnostics.hasErrors());
  const Algorithm& a = *r.algorithm;
  EXPECT_EQ(a.sliceBytes, 65536u);
  EXPECT_EQ(sliceBytesOf(a), 65536u);
  EXPECT_NE(a, plain);
  EXPECT_NE(writeXml(a).find(R"(maxBytes="0" sliceBytes="65536">)"), std::string::npos);
  expectRoundTrips(a);
  // MSCCL runs it, unpipelined.
  onlyExecutorFinding(a, DiagCode::kSliceIgnored, "sliceBytes=65536");
  DiagnosticList none;
  checkExecutorLimits(plain, none);
  EXPECT_TRUE(none.items().empty());

  Algorithm odd = a;
  odd.sliceBytes = 1000;
  DiagnosticList found;
  validateStructure(odd, found);
  ASSERT_TRUE(found.hasErrors());
  EXPECT_EQ(found.items()[0].code, DiagCode::kBadAlgoAttribute);
  EXPECT_NE(found.items()[0].message.find("sliceBytes=1000 is not a multiple of 16"),
            std::string::npos);
  ReadResult bad =
      readXml(replaceOnce(kPairs, R"(maxBytes="0")", R"(maxBytes="0" sliceBytes="-4")"), "bad.xml");
  EXPECT_TRUE(bad.diagnostics.hasErrors());
}

// A step's lag (Step::lag): read, written only where set, in JSON too;
// MSCCL's executor ignores it (W509, a warning even for that target: the
// file's order is what it runs, and the verifier proves that order too).
TEST(XmlReader, ReadsWritesAndChecksTheLagsChorusOrdersSlicesBy) {
  Algorithm plain = *readXml(kPairs, "p2.xml").algorithm;
  EXPECT_EQ(writeXml(plain).find("lag="), std::string::npos);
  EXPECT_EQ(writeJson(plain).find("\"lag\""), std::string::npos);
  std::string text = kPairs;
  for (size_t at = 0; (at = text.find(R"(hasdep="0"/>)", at)) != std::string::npos;)
    text.replace(at, 12, R"(hasdep="0" lag="3"/>)");
  ReadResult r = readXml(text, "lagged.xml");
  ASSERT_TRUE(r.algorithm);
  EXPECT_FALSE(r.diagnostics.hasErrors());
  const Algorithm& a = *r.algorithm;
  EXPECT_TRUE(hasLags(a));
  EXPECT_FALSE(hasLags(plain));
  for (const Rank& rank : a.ranks)
    for (const Step& s : rank.tbs[0].steps) EXPECT_EQ(s.lag, 3);
  EXPECT_NE(a, plain);
  EXPECT_NE(writeXml(a).find(R"(hasdep="0" lag="3" />)"), std::string::npos) << writeXml(a);
  expectRoundTrips(a);
  const Diagnostic d = onlyExecutorFinding(a, DiagCode::kLagIgnored, "6 step(s) have a lag");
  EXPECT_EQ(d.loc.rank, 0);
  EXPECT_EQ(d.loc.step, 0);

  // One slice's order: each threadblock's steps stable-sorted by lag.
  Algorithm mixed = a;
  std::vector<Step>& steps = mixed.ranks[0].tbs[0].steps;
  steps[0].lag = 2;  // s, r, re at lags 2, 3, 0: re, s, r
  steps[2].lag = 0;
  std::vector<std::vector<std::vector<int>>> at;
  const Algorithm slice = sliceOrder(mixed, &at);
  EXPECT_EQ(at[0][0], (std::vector<int>{1, 2, 0}));
  EXPECT_EQ(at[1][0], (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(slice.ranks[0].tbs[0].steps[0].type, StepType::kReduce);
  EXPECT_EQ(slice.ranks[0].tbs[0].steps[1].type, StepType::kSend);
  EXPECT_FALSE(hasLags(slice));

  for (const char* bad : {R"(lag="-1")", R"(lag="65536")", R"(lag="x")"}) {
    SCOPED_TRACE(bad);
    ReadResult b =
        readXml(replaceOnce(kPairs, R"(hasdep="0"/>)", std::string("hasdep=\"0\" ") + bad + "/>"),
                "bad.xml");
    EXPECT_TRUE(b.diagnostics.hasErrors());
  }
  ReadResult big =
      readJson(replaceOnce(writeJson(a), R"("lag": 3)", R"("lag": 70000)"), "big.json");
  EXPECT_TRUE(big.diagnostics.hasErrors());
}

// The document as earlier versions wrote it, through a pugixml DOM: the
// streamed writer must give it byte for byte (the files users keep and
// diff, and the layout MSCCL's tools read).
std::string writeThroughPugixml(const Algorithm& a) {
  pugi::xml_document doc;
  pugi::xml_node root = doc.append_child("algo");
  auto text = [](pugi::xml_node n, const char* name, std::string_view v) {
    n.append_attribute(name).set_value(std::string(v).c_str());
  };
  auto number = [](pugi::xml_node n, const char* name, long long v) {
    n.append_attribute(name).set_value(v);
  };
  text(root, "name", a.name);
  text(root, "proto", protocolName(a.protocol));
  number(root, "nchannels", a.nchannels);
  number(root, "nchunksperloop", a.nchunksPerLoop);
  number(root, "ngpus", a.ngpus);
  text(root, "coll", a.collectiveName);
  number(root, "inplace", a.inplace ? 1 : 0);
  number(root, "outofplace", a.outofplace ? 1 : 0);
  root.append_attribute("minBytes").set_value(static_cast<unsigned long long>(a.minBytes));
  root.append_attribute("maxBytes").set_value(static_cast<unsigned long long>(a.maxBytes));
  if (a.sliceBytes > 0)
    root.append_attribute("sliceBytes").set_value(static_cast<unsigned long long>(a.sliceBytes));
  for (const Rank& r : a.ranks) {
    pugi::xml_node g = root.append_child("gpu");
    number(g, "id", r.id);
    number(g, "i_chunks", r.inputChunks);
    number(g, "o_chunks", r.outputChunks);
    number(g, "s_chunks", r.scratchChunks);
    for (const Threadblock& tb : r.tbs) {
      pugi::xml_node t = g.append_child("tb");
      number(t, "id", tb.id);
      number(t, "send", tb.sendPeer);
      number(t, "recv", tb.recvPeer);
      number(t, "chan", tb.channel);
      for (size_t i = 0; i < tb.steps.size(); ++i) {
        const Step& s = tb.steps[i];
        pugi::xml_node e = t.append_child("step");
        number(e, "s", static_cast<long long>(i));
        text(e, "type", stepTypeName(s.type));
        text(e, "srcbuf", std::string(1, bufferLetter(s.srcBuf)));
        number(e, "srcoff", s.srcOff);
        text(e, "dstbuf", std::string(1, bufferLetter(s.dstBuf)));
        number(e, "dstoff", s.dstOff);
        number(e, "cnt", s.count);
        number(e, "depid", s.depTb);
        number(e, "deps", s.depStep);
        number(e, "hasdep", s.hasDep ? 1 : 0);
      }
    }
  }
  std::ostringstream out;
  doc.save(out, "  ", pugi::format_indent | pugi::format_no_declaration, pugi::encoding_utf8);
  return out.str();
}

TEST(XmlWriter, WritesWhatThePugixmlDocumentWrote) {
  for (const std::string& path : productionFiles()) {
    SCOPED_TRACE(baseName(path));
    Algorithm a = mustRead(path);
    EXPECT_EQ(writeXml(a), writeThroughPugixml(a));
  }
  Algorithm a = *readXml(kPairs, "p2.xml").algorithm;
  // Every byte a name can hold: the escaped ones (&, <, ", controls) and
  // the rest as they are.
  for (int c = 1; c < 256; ++c) a.name += static_cast<char>(c);
  a.collectiveName = "custom \"x\" & <y> 'z'";
  a.minBytes = std::numeric_limits<uint64_t>::max();
  a.sliceBytes = 48 << 10;
  a.ranks[0].tbs.emplace_back().id = 1;  // no steps: an empty element
  a.ranks.emplace_back().id = 2;         // no threadblocks
  EXPECT_EQ(writeXml(a), writeThroughPugixml(a));
  a.ranks.clear();
  EXPECT_EQ(writeXml(a), writeThroughPugixml(a));
}

// Reading, writing and reading again gives the same IR and the same verdict,
// for every production file.
TEST(XmlRoundTrip, ProductionFilesAreIdentical) {
  for (const std::string& path : productionFiles()) {
    SCOPED_TRACE(baseName(path));
    Algorithm a = mustRead(path);
    std::string once = writeXml(a);
    ReadResult r = readXml(once, "rewritten.xml");
    ASSERT_TRUE(r.algorithm);
    EXPECT_EQ(*r.algorithm, a);
    EXPECT_EQ(writeXml(*r.algorithm), once);  // writing is a fixed point
    verify::Report v1 = verify::verifyAlgorithm(a), v2 = verify::verifyAlgorithm(*r.algorithm);
    EXPECT_TRUE(v1.correct());
    EXPECT_EQ(v1.correct(), v2.correct());
    ASSERT_EQ(v1.diagnostics.size(), v2.diagnostics.size());
    for (size_t i = 0; i < v1.diagnostics.size(); ++i) {
      EXPECT_EQ(v1.diagnostics.items()[i].code, v2.diagnostics.items()[i].code);
      EXPECT_EQ(v1.diagnostics.items()[i].message, v2.diagnostics.items()[i].message);
    }
  }
}

}  // namespace
}  // namespace chorus::ir
