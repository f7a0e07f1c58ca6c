// chorus._chorus: the C++ library as seen from Python (python/chorus wraps
// it; docs/python.md). Every entry checks its arguments and reports bad
// input as chorus.Error carrying the diagnostics; nothing here aborts or
// lets a C++ exception escape except pybind11's own (which become Python
// exceptions). Long calls release the GIL.
#include <chorus/chorus.h>
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chorus/gen.hpp>
#include <chorus/lang.hpp>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "api/convert.h"
#include "api/generate.h"
#include "compiler/program_file.h"
#include "core/diagnostic.h"
#include "core/types.h"
#include "ir/json_io.h"
#include "ir/mscclpp_plan.h"
#include "ir/stats.h"
#include "ir/xml_reader.h"
#include "ir/xml_writer.h"
#include "lang/registry.h"
#include "runtime/exec/check.h"
#include "runtime/exec/driver.h"
#include "runtime/exec/executor.h"
#include "sim/simulator.h"
#include "topo/presets.h"
#include "verify/plan_verifier.h"
#include "verify/verifier.h"
#include "workflows/files.h"
#include "workflows/report_page.h"
#include "workflows/synthesis.h"

namespace py = pybind11;

namespace chorus::python {
namespace {

// Raises chorus.Error(message, diagnostics).
[[noreturn]] void raise(const std::string& message, const std::vector<Diagnostic>& diags = {}) {
  py::object cls = py::module_::import("chorus._errors").attr("Error");
  py::object exc = cls(message, py::cast(diags));
  PyErr_SetObject(cls.ptr(), exc.ptr());
  throw py::error_already_set();
}

// An algorithm as Python holds it: immutable, shared by the objects made from it.
struct Algorithm {
  std::shared_ptr<const ir::Algorithm> ir;
  std::vector<Diagnostic> notes;  // what reading it found that is not an error
  std::string spec;               // a compiled custom collective's postcondition JSON
};

Algorithm fromRead(ir::ReadResult rr, const std::string& what) {
  rr.diagnostics.sort();
  if (!rr.algorithm || rr.diagnostics.hasErrors())
    raise("cannot read " + what + ": " +
              (rr.diagnostics.items().empty() ? std::string("unknown error")
                                              : rr.diagnostics.items().front().format()),
          rr.diagnostics.items());
  return {
      std::make_shared<const ir::Algorithm>(std::move(*rr.algorithm)), rr.diagnostics.items(), {}};
}

std::optional<verify::PostCondition> readSpec(const std::optional<std::string>& text) {
  if (!text) return std::nullopt;
  DiagnosticList diags;
  std::optional<verify::PostCondition> spec = verify::parsePostCondition(*text, "<spec>", diags);
  if (!spec) raise("the postcondition does not read", diags.items());
  return spec;
}

// The postcondition a compiled custom program carries, if any.
std::optional<std::string> specOf(const Algorithm& a) {
  if (a.spec.empty()) return std::nullopt;
  return a.spec;
}

// The verifier's report as a dict.
py::dict verifyAlgorithm(const Algorithm& a, bool targetMscclExecutor,
                         const std::optional<std::string>& specText) {
  std::optional<verify::PostCondition> spec = readSpec(specText ? specText : specOf(a));
  verify::Options vo;
  vo.targetMscclExecutor = targetMscclExecutor;
  vo.spec = spec ? &*spec : nullptr;
  verify::Report rep;
  {
    py::gil_scoped_release nogil;
    rep = verify::verifyAlgorithm(*a.ir, vo);
  }
  py::dict d;
  d["correct"] = rep.correct();
  d["diagnostics"] = rep.diagnostics.items();
  py::list forms;
  for (const verify::FormVerdict& f : rep.forms) {
    py::dict form;
    form["inplace"] = f.inplace;
    form["proven"] = f.proven;
    forms.append(form);
  }
  d["forms"] = forms;
  d["semantics_checked"] = rep.semanticsChecked;
  d["root"] = rep.root;
  return d;
}

DataType dataType(const std::string& name) {
  std::optional<DataType> t = parseDataType(name);
  if (!t)
    raise("unknown data type '" + name + "' (int8 ... float64, fp16, bf16, fp8e4m3, fp8e5m2)");
  return *t;
}

ReduceOp reduceOp(const std::string& name) {
  std::optional<ReduceOp> op = parseReduceOp(name);
  if (!op) raise("unknown reduction '" + name + "' (sum, prod, max, min, avg)");
  return *op;
}

// numpy's type for a Chorus type (bf16 and fp8 have none: their bits as
// unsigned integers of their size).
py::dtype numpyType(DataType t) {
  switch (t) {
    case DataType::kInt8:
      return py::dtype("int8");
    case DataType::kUint8:
    case DataType::kFp8E4M3:
    case DataType::kFp8E5M2:
      return py::dtype("uint8");
    case DataType::kInt32:
      return py::dtype("int32");
    case DataType::kUint32:
      return py::dtype("uint32");
    case DataType::kInt64:
      return py::dtype("int64");
    case DataType::kUint64:
      return py::dtype("uint64");
    case DataType::kFloat16:
      return py::dtype("float16");
    case DataType::kBfloat16:
      return py::dtype("uint16");
    case DataType::kFloat32:
      return py::dtype("float32");
    case DataType::kFloat64:
      return py::dtype("float64");
  }
  return py::dtype("uint8");
}

// Runs `a` once on its ranks as threads of this process. With `inputs`
// (one array per rank), on them; else on nccl-tests-style data that is
// checked against the collective's closed form. Returns each rank's output.
py::list run(const Algorithm& a, std::optional<std::vector<py::array>> inputs, size_t count,
             const std::string& dtype, const std::string& opName, std::optional<bool> inplaceArg,
             const std::optional<std::string>& specText) {
  const DataType type = dataType(dtype);
  const ReduceOp op = reduceOp(opName);
  auto va = runtime::VerifiedAlgorithm::make(ir::Algorithm(*a.ir));
  if (!va.isOk()) raise(va.status().message());
  const ir::Algorithm& algo = va.value()->algo();
  const bool inplace = inplaceArg.value_or(!algo.outofplace);
  if (inplace ? !algo.inplace : !algo.outofplace)
    raise(std::string("the algorithm does not serve the ") +
          (inplace ? "in-place" : "out-of-place") + " call form");
  const size_t n = static_cast<size_t>(algo.ngpus);
  const size_t esz = dataTypeSize(type);
  const size_t quantum = runtime::countQuantum(algo);
  py::list outputs;
  if (!inputs) {
    if (count == 0) count = quantum;
    if (count % quantum != 0)
      raise("count " + std::to_string(count) + " is not a multiple of " + std::to_string(quantum) +
            " (the algorithm's chunks)");
    std::optional<verify::PostCondition> spec = readSpec(specText ? specText : specOf(a));
    auto data = runtime::CollectiveData::make(*va.value(), count, type, op, inplace,
                                              spec ? &*spec : nullptr);
    if (!data.isOk()) raise(data.status().message());
    Status st;
    {
      py::gil_scoped_release nogil;
      st = runtime::runThreaded(*va.value(), data.value().calls());
    }
    if (!st.isOk()) raise(st.message());
    std::string first;
    if (size_t wrong = data.value().countWrong(&first); wrong > 0)
      raise(std::to_string(wrong) + " output element(s) wrong; first: " + first);
    const size_t outElems = runtime::bufferElems(algo, count).second;
    for (const runtime::CallArgs& c : data.value().calls()) {
      py::array out(numpyType(type), std::vector<py::ssize_t>{static_cast<py::ssize_t>(outElems)});
      std::memcpy(out.mutable_data(), c.recvbuff, outElems * esz);
      outputs.append(out);
    }
    return outputs;
  }
  if (inputs->size() != n)
    raise("the algorithm has " + std::to_string(n) + " ranks; " + std::to_string(inputs->size()) +
          " input arrays were given");
  const size_t len = static_cast<size_t>((*inputs)[0].size());
  // The count whose input buffer is `len` elements (collectives count differently).
  count = 0;
  for (size_t k : {len, len / n, len * n})
    if (k > 0 && runtime::bufferElems(algo, k).first == len) {
      count = k;
      break;
    }
  if (count == 0 || count % quantum != 0)
    raise("inputs of " + std::to_string(len) +
          " elements do not make a call of this algorithm (counts are multiples of " +
          std::to_string(quantum) + ")");
  auto [inElems, outElems] = runtime::bufferElems(algo, count);
  std::vector<py::array> ins;
  std::vector<std::vector<unsigned char>> bufs(n);
  std::vector<runtime::CallArgs> calls(n);
  for (size_t r = 0; r < n; ++r) {
    py::array in = py::array::ensure((*inputs)[r], py::array::c_style);
    if (!in || static_cast<size_t>(in.size()) != len || static_cast<size_t>(in.itemsize()) != esz)
      raise("input " + std::to_string(r) + " is not a contiguous array of " + std::to_string(len) +
            " elements of " + std::to_string(esz) + " bytes (" + dtype + ")");
    ins.push_back(in);
    // The receive buffer; in place, the input lives in it where the
    // collective's convention puts it (allgather: the rank's block of the
    // output; reducescatter: the output is the rank's block of the input).
    const size_t elems = std::max(inElems, outElems);
    bufs[r].assign(elems * esz, 0);
    runtime::CallArgs& c = calls[r];
    c.count = count;
    c.type = type;
    c.op = op;
    c.recvbuff = bufs[r].data();
    if (!inplace) {
      c.sendbuff = in.data();
      continue;
    }
    size_t inOffset = 0;
    if (inElems < outElems) inOffset = r * inElems;
    std::memcpy(bufs[r].data() + inOffset * esz, in.data(), len * esz);
    c.sendbuff = bufs[r].data() + inOffset * esz;
    if (outElems < inElems) c.recvbuff = bufs[r].data() + r * outElems * esz;
  }
  Status st;
  {
    py::gil_scoped_release nogil;
    st = runtime::runThreaded(*va.value(), calls);
  }
  if (!st.isOk()) raise(st.message());
  for (size_t r = 0; r < n; ++r) {
    py::array out(ins[r].dtype(), std::vector<py::ssize_t>{static_cast<py::ssize_t>(outElems)});
    std::memcpy(out.mutable_data(), calls[r].recvbuff, outElems * esz);
    outputs.append(out);
  }
  return outputs;
}

py::dict simulate(const Algorithm& a, const std::string& topoSpec, size_t bytes, size_t elementSize,
                  std::optional<bool> inplace, size_t sliceBytes, size_t parts, int slots,
                  bool trace, double timelineStep) {
  auto t = topo::loadTopology(topoSpec);
  if (!t.isOk()) raise(t.status().message());
  sim::Options so;
  so.bytes = bytes;
  so.elementSize = elementSize;
  so.inplace = inplace.value_or(!a.ir->outofplace);
  so.sliceBytes = sliceBytes;
  so.partsPerSlice = parts;
  so.slots = slots;
  so.trace = trace;
  so.timelineStep = timelineStep;
  std::optional<Result<sim::Result>> r;
  {
    py::gil_scoped_release nogil;
    r.emplace(sim::simulate(*a.ir, t.value(), so));
  }
  if (!r->isOk()) raise(r->status().message());
  const sim::Result& s = r->value();
  const topo::Topology& topo = t.value();
  py::dict d;
  d["topology"] = topo.name;
  d["bytes"] = bytes;
  d["time"] = s.time;
  d["algbw"] = s.algbw;
  d["busbw"] = s.busbw;
  d["count"] = s.count;
  d["iterations"] = s.iterations;
  d["transfers"] = s.transfers;
  py::list links;
  for (size_t l = 0; l < topo.links.size(); ++l) {
    const topo::Link& link = topo.links[l];
    py::dict e;
    e["from"] = topo.nodes[static_cast<size_t>(link.from)].name;
    e["to"] = topo.nodes[static_cast<size_t>(link.to)].name;
    e["bandwidth"] = link.bandwidth;
    e["bytes"] = l < s.linkBytes.size() ? s.linkBytes[l] : 0.0;
    e["utilization"] = link.bandwidth > 0 && s.time > 0 && l < s.linkBytes.size()
                           ? s.linkBytes[l] / (link.bandwidth * 1e9 * s.time)
                           : 0.0;
    if (timelineStep > 0 && l < s.timeline.size()) e["timeline"] = s.timeline[l];
    links.append(e);
  }
  d["links"] = links;
  py::list critical;
  for (const sim::PathStep& p : s.critical) {
    py::dict e;
    e["rank"] = p.rank;
    e["tb"] = p.tb;
    e["step"] = p.step;
    e["iteration"] = p.iteration;
    e["type"] = std::string(ir::stepTypeName(p.type));
    e["start"] = p.start;
    e["end"] = p.end;
    e["waited"] = p.waited;
    critical.append(e);
  }
  d["critical_path"] = critical;
  if (trace) d["trace"] = s.trace;
  return d;
}

py::dict topology(const std::string& spec) {
  auto t = topo::loadTopology(spec);
  if (!t.isOk()) raise(t.status().message());
  const topo::Topology& topo = t.value();
  py::dict d;
  d["name"] = topo.name;
  d["ranks"] = topo.ranks();
  py::list nodes;
  for (const topo::Node& n : topo.nodes) {
    py::dict e;
    e["name"] = n.name;
    e["rank"] = n.rank;
    e["box"] = n.box;
    nodes.append(e);
  }
  d["nodes"] = nodes;
  py::list links;
  for (const topo::Link& l : topo.links) {
    py::dict e;
    e["from"] = topo.nodes[static_cast<size_t>(l.from)].name;
    e["to"] = topo.nodes[static_cast<size_t>(l.to)].name;
    e["bandwidth"] = l.bandwidth;
    e["latency"] = l.latency;
    links.append(e);
  }
  d["links"] = links;
  return d;
}

// The DSL as Python sees it: a program shared by the chunks made from it.
struct Program {
  std::shared_ptr<lang::Program> p;
  // Scratch buffers by name (MSCCLang names them with strings).
  std::shared_ptr<std::vector<std::string>> scratch = std::make_shared<std::vector<std::string>>();
};

struct Chunk {
  std::shared_ptr<lang::Program> p;
  lang::Chunk c;
};

lang::Hints hints(int sendTb, int recvTb, int channel) {
  lang::Hints h;
  h.sendTb = sendTb;
  h.recvTb = recvTb;
  h.channel = channel;
  return h;
}

// Findings of the program so far (the recording's misuse), as diagnostics.
std::vector<Diagnostic> problems(const lang::Program& p) {
  std::vector<Diagnostic> out;
  for (const lang::Problem& pr : p.problems()) {
    Location loc;
    loc.file = pr.file;
    loc.line = pr.line;
    loc.column = pr.column;
    out.push_back(Diagnostic{DiagCode::kProgramMisuse, Severity::kError, loc, pr.message});
  }
  return out;
}

Algorithm compileProgram(const Program& prog, bool verify) {
  GenerateOptions go;
  go.verify = verify;
  // With the GIL: another Python thread could be adding to the program.
  CheckedProgram c = compileAndVerify(*prog.p, go);
  if (!c.ok) {
    std::string first = c.diagnostics.items().empty() ? std::string("the program does not compile")
                                                      : c.diagnostics.items().front().format();
    if (c.compiled.ok())
      first =
          "the compiled algorithm does not verify: the program computes something other "
          "than " +
          prog.p->options().collective + "; " + first;
    raise(first, c.diagnostics.items());
  }
  Algorithm a{std::make_shared<const ir::Algorithm>(std::move(c.compiled.algo)), {}, {}};
  for (const Diagnostic& d : c.diagnostics.items())
    if (d.severity != Severity::kError) a.notes.push_back(d);
  if (c.spec) a.spec = verify::writePostCondition(*c.spec);
  return a;
}

Algorithm gen(const lang::ProgramOptions& args, bool verify) {
  std::string problem;
  std::unique_ptr<lang::Program> recorded = lang::recordProgram(args.name, args, &problem);
  if (recorded == nullptr) raise(args.name + ": " + problem);
  if (!recorded->problems().empty())
    raise(recorded->problems().front().message, problems(*recorded));
  Program prog{std::move(recorded)};
  return compileProgram(prog, verify);
}

py::tuple synthesize(const workflows::SynthArgs& args) {
  std::string json, xml, error;
  int rc = 0;
  {
    py::gil_scoped_release nogil;
    rc = workflows::synthesize(args, &json, &xml, &error);
  }
  if (rc != 0) raise(error);
  return py::make_tuple(json, xml);
}

// chorus.report(): the page `chorus report` writes (docs/report.md), for
// `items` in their order: paths (read here, so an unreadable file is
// reported) and Algorithms (labelled by `labels`, in turn).
std::string reportHtml(const workflows::ReportArgs& args, const py::list& items,
                       const std::vector<std::string>& labels) {
  std::vector<report::AlgorithmInput> inputs;
  size_t next = 0;
  for (const py::handle& item : items) {
    if (py::isinstance<Algorithm>(item)) {
      const Algorithm& a = item.cast<const Algorithm&>();
      inputs.push_back(
          report::AlgorithmInput{next < labels.size() ? labels[next] : a.ir->name, *a.ir, {}});
      ++next;
    } else {
      std::string path = py::str(item);
      ir::ReadResult rr = ir::readAlgorithmFile(path, workflows::readOptions());
      inputs.push_back(
          report::AlgorithmInput{path, std::move(rr.algorithm), std::move(rr.diagnostics)});
    }
  }
  std::string html, error;
  int rc = 0;
  {
    py::gil_scoped_release nogil;
    workflows::ReportArgs quiet = args;
    quiet.files.clear();
    quiet.printVerdicts = false;
    rc = workflows::reportPage(quiet, std::move(inputs), &html, &error);
  }
  if (rc != 0) raise(error);
  return html;
}

py::dict stats(const Algorithm& a) {
  const ir::Algorithm& al = *a.ir;
  py::dict d;
  d["threadblocks"] = al.totalThreadblocks();
  d["steps"] = al.totalSteps();
  size_t most = 0;
  for (const ir::Rank& r : al.ranks)
    for (const ir::Threadblock& tb : r.tbs) most = std::max(most, tb.steps.size());
  d["max_steps_per_threadblock"] = most;
  return d;
}

// A communicator of the C API (chorus.h) over numpy arrays: for ranks that
// are processes (chorus launch, torchrun, mpirun: from_env) or threads.
struct Comm {
  chorusComm_t c = nullptr;
  ~Comm() {
    if (c != nullptr) chorusCommDestroy(c);
  }
};

void check(chorusResult_t r) {
  if (r != chorusSuccess) raise(chorusGetLastError(nullptr));
}

chorusComm_t live(const Comm& c) {
  if (c.c == nullptr) raise("the communicator was destroyed");
  return c.c;
}

chorusDataType_t cType(const py::array& a, const std::string& dtype,
                       const py::array* other = nullptr) {
  // Counts are in elements: both buffers must hold the same type.
  if (other != nullptr &&
      (other->itemsize() != a.itemsize() || other->dtype().kind() != a.dtype().kind()))
    raise("the arrays' dtypes differ (" + py::str(a.dtype()).cast<std::string>() + " and " +
          py::str(other->dtype()).cast<std::string>() + ")");
  // The dtype named, else the array's (numpy's names are among core's).
  const std::string name = dtype.empty() ? py::str(a.dtype()).cast<std::string>() : dtype;
  std::optional<DataType> t = parseDataType(name);
  if (!t)
    raise("no Chorus data type for '" + name +
          "' (pass dtype='bf16' for bfloat16 in uint16 arrays)");
  if (dataTypeSize(*t) != static_cast<size_t>(a.itemsize()))
    raise("dtype " + name + " has " + std::to_string(dataTypeSize(*t)) +
          "-byte elements; the array's are " + std::to_string(a.itemsize()));
  return api::toC(*t);
}

chorusRedOp_t cOp(const std::string& op) { return api::toC(reduceOp(op)); }

using A = std::optional<py::array>;

// A contiguous array (writable for outputs) or none.
py::array* contiguous(py::array* a, bool writable, const char* what) {
  if (a == nullptr) return nullptr;
  if (!(a->flags() & py::array::c_style)) raise(std::string(what) + " is not C-contiguous");
  if (writable && !a->writeable()) raise(std::string(what) + " is read-only");
  return a;
}
py::array* contiguous(A& a, bool writable, const char* what) {
  return contiguous(a ? &*a : nullptr, writable, what);
}

size_t elems(const py::array* a) { return a == nullptr ? 0 : static_cast<size_t>(a->size()); }

// Runs one C call without the GIL.
template <typename F>
void call(F&& f) {
  chorusResult_t r;
  {
    py::gil_scoped_release nogil;
    r = f();
  }
  check(r);
}

// Arrays of calls made inside chorus.group_start() / group_end(): Chorus
// only queues such a call, so its buffers must outlive the binding until
// the group ends (references dropped there, with the GIL held; a thread
// that exits inside a group leaks them rather than touch Python).
struct GroupArrays {
  int depth = 0;
  std::vector<PyObject*> held;
};
thread_local GroupArrays groupArrays;

void keep(std::initializer_list<const py::array*> arrays) {
  if (groupArrays.depth == 0) return;
  for (const py::array* a : arrays)
    if (a != nullptr) {
      Py_INCREF(a->ptr());
      groupArrays.held.push_back(a->ptr());
    }
}

int rankOf(chorusComm_t c) {
  int r = -1;
  check(chorusCommUserRank(c, &r));
  return r;
}

size_t sizeOf(chorusComm_t c) {
  int n = 0;
  check(chorusCommCount(c, &n));
  return static_cast<size_t>(n);
}

void bindComm(py::module_& m) {
  m.def(
      "unique_id",
      [] {
        chorusUniqueId id;
        check(chorusGetUniqueId(&id));
        return py::bytes(id.internal, sizeof id.internal);
      },
      "Starts a root that ranks meet at and returns its id (bytes): pass it to every rank's "
      "Comm.init_rank.");
  py::class_<Comm, std::shared_ptr<Comm>>(
      m, "Comm",
      "A communicator: this process's (or thread's) rank of a group of ranks, with NCCL's "
      "collectives over numpy arrays (counts follow from the arrays). Ranks are processes "
      "(Comm.from_env under chorus launch, torchrun or mpirun; Comm.init_rank) or threads "
      "(Comm.init_all: call each rank from its own thread). Errors raise chorus.Error.")
      .def_static(
          "from_env",
          [] {
            auto c = std::make_shared<Comm>();
            call([&] { return chorusCommInitFromEnv(&c->c); });
            return c;
          },
          "This process's rank of a job started by chorus launch, torchrun or mpirun (rank, "
          "size and root from the environment).")
      .def_static(
          "init_rank",
          [](int nranks, const py::bytes& id, int rank) {
            std::string bytes = id;
            chorusUniqueId uid{};
            if (bytes.size() != sizeof uid.internal)
              raise("a unique id has " + std::to_string(sizeof uid.internal) + " bytes, not " +
                    std::to_string(bytes.size()));
            std::memcpy(uid.internal, bytes.data(), bytes.size());
            auto c = std::make_shared<Comm>();
            call([&] { return chorusCommInitRank(&c->c, nranks, uid, rank); });
            return c;
          },
          py::arg("nranks"), py::arg("unique_id"), py::arg("rank"),
          "Rank `rank` of `nranks` that meet at `unique_id` (chorus.unique_id()).")
      .def_static(
          "init_all",
          [](int n) {
            std::vector<chorusComm_t> raw(static_cast<size_t>(std::max(n, 0)), nullptr);
            call([&] { return chorusCommInitAll(raw.data(), n, nullptr); });
            std::vector<std::shared_ptr<Comm>> out;
            for (chorusComm_t c : raw) {
              out.push_back(std::make_shared<Comm>());
              out.back()->c = c;
            }
            return out;
          },
          py::arg("n"), "`n` ranks as threads of this process; drive each from its own thread.")
      .def_property_readonly("rank", [](const Comm& c) { return rankOf(live(c)); })
      .def_property_readonly("size", [](const Comm& c) { return sizeOf(live(c)); })
      .def(
          "destroy",
          [](Comm& c) {
            if (c.c != nullptr) {
              chorusComm_t x = c.c;
              c.c = nullptr;
              call([&] { return chorusCommDestroy(x); });
            }
          },
          "Frees the communicator (also done when it is garbage collected).")
      .def(
          "abort",
          [](Comm& c) {
            if (c.c != nullptr) {
              chorusComm_t x = c.c;
              c.c = nullptr;
              call([&] { return chorusCommAbort(x); });
            }
          },
          "Ends every pending call of the communicator's ranks, then frees it.")
      .def(
          "allreduce",
          [](const Comm& c, py::array send, A recv, const std::string& op,
             const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* r = contiguous(recv, true, "recv");
            py::array* s = contiguous(&send, r == nullptr, "send");
            if (r != nullptr && elems(r) != elems(s)) raise("send and recv differ in size");
            auto t = cType(*s, dtype, r);
            auto o = cOp(op);
            keep({s, r});
            call([&] {
              return chorusAllReduce(s->data(),
                                     r != nullptr ? r->mutable_data() : s->mutable_data(), elems(s),
                                     t, o, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv") = py::none(), py::arg("op") = "sum",
          py::arg("dtype") = "", "recv = reduction of every rank's send (recv None: in place).")
      .def(
          "allgather",
          [](const Comm& c, py::array send, py::array recv, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* s = contiguous(&send, false, "send");
            py::array* r = contiguous(&recv, true, "recv");
            const size_t n = sizeOf(cm);
            if (elems(r) != elems(s) * n) raise("recv must hold size x len(send) elements");
            auto t = cType(*s, dtype, r);
            keep({s, r});
            call([&] {
              return chorusAllGather(s->data(), r->mutable_data(), elems(s), t, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv"), py::arg("dtype") = "",
          "recv = every rank's send, in rank order.")
      .def(
          "reduce_scatter",
          [](const Comm& c, py::array send, py::array recv, const std::string& op,
             const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* s = contiguous(&send, false, "send");
            py::array* r = contiguous(&recv, true, "recv");
            const size_t n = sizeOf(cm);
            if (elems(s) != elems(r) * n) raise("send must hold size x len(recv) elements");
            auto t = cType(*s, dtype, r);
            auto o = cOp(op);
            keep({s, r});
            call([&] {
              return chorusReduceScatter(s->data(), r->mutable_data(), elems(r), t, o, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv"), py::arg("op") = "sum", py::arg("dtype") = "",
          "recv = this rank's block of the reduction of every rank's send.")
      .def(
          "alltoall",
          [](const Comm& c, py::array send, py::array recv, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* s = contiguous(&send, false, "send");
            py::array* r = contiguous(&recv, true, "recv");
            const size_t n = sizeOf(cm);
            if (elems(s) != elems(r) || elems(s) % n != 0)
              raise("send and recv must hold the same multiple of size elements");
            auto t = cType(*s, dtype, r);
            keep({s, r});
            call([&] {
              return chorusAllToAll(s->data(), r->mutable_data(), elems(s) / n, t, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv"), py::arg("dtype") = "",
          "Block j of send goes to rank j; block i of recv comes from rank i.")
      .def(
          "broadcast",
          [](const Comm& c, py::array buf, int root, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* b = contiguous(&buf, true, "buffer");
            auto t = cType(*b, dtype);
            keep({b});
            call([&] {
              return chorusBroadcast(b->data(), b->mutable_data(), elems(b), t, root, cm, nullptr);
            });
          },
          py::arg("buffer"), py::arg("root") = 0, py::arg("dtype") = "",
          "Every rank's buffer = the root's (in place).")
      .def(
          "reduce",
          [](const Comm& c, py::array send, A recv, int root, const std::string& op,
             const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* s = contiguous(&send, false, "send");
            py::array* r = contiguous(recv, true, "recv");
            if (r != nullptr && elems(r) != elems(s)) raise("send and recv differ in size");
            auto t = cType(*s, dtype, r);
            auto o = cOp(op);
            keep({s, r});
            call([&] {
              return chorusReduce(s->data(), r != nullptr ? r->mutable_data() : nullptr, elems(s),
                                  t, o, root, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv") = py::none(), py::arg("root") = 0, py::arg("op") = "sum",
          py::arg("dtype") = "",
          "The root's recv = reduction of every rank's send (recv only needed at the root).")
      .def(
          "gather",
          [](const Comm& c, py::array send, A recv, int root, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* s = contiguous(&send, false, "send");
            py::array* r = contiguous(recv, true, "recv");
            auto t = cType(*s, dtype, r);
            if (rankOf(cm) == root && (r == nullptr || elems(r) != elems(s) * sizeOf(cm)))
              raise("gather: the root's recv must hold size x len(send) elements");
            keep({s, r});
            call([&] {
              return chorusGather(s->data(), r != nullptr ? r->mutable_data() : nullptr, elems(s),
                                  t, root, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv") = py::none(), py::arg("root") = 0, py::arg("dtype") = "",
          "The root's recv = every rank's send in rank order.")
      .def(
          "scatter",
          [](const Comm& c, A send, py::array recv, int root, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* s = contiguous(send, false, "send");
            py::array* r = contiguous(&recv, true, "recv");
            auto t = cType(*r, dtype, s);
            if (rankOf(cm) == root && (s == nullptr || elems(s) != elems(r) * sizeOf(cm)))
              raise("scatter: the root's send must hold size x len(recv) elements");
            keep({s, r});
            call([&] {
              return chorusScatter(s != nullptr ? s->data() : nullptr, r->mutable_data(), elems(r),
                                   t, root, cm, nullptr);
            });
          },
          py::arg("send"), py::arg("recv"), py::arg("root") = 0, py::arg("dtype") = "",
          "Rank r's recv = block r of the root's send (send only needed at the root).")
      .def(
          "send",
          [](const Comm& c, py::array buf, int peer, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* b = contiguous(&buf, false, "buffer");
            auto t = cType(*b, dtype);
            keep({b});
            call([&] { return chorusSend(b->data(), elems(b), t, peer, cm, nullptr); });
          },
          py::arg("buffer"), py::arg("peer"), py::arg("dtype") = "",
          "Sends the array to `peer` (returns when its receive has taken it).")
      .def(
          "recv",
          [](const Comm& c, py::array buf, int peer, const std::string& dtype) {
            chorusComm_t cm = live(c);
            py::array* b = contiguous(&buf, true, "buffer");
            auto t = cType(*b, dtype);
            keep({b});
            call([&] { return chorusRecv(b->mutable_data(), elems(b), t, peer, cm, nullptr); });
          },
          py::arg("buffer"), py::arg("peer"), py::arg("dtype") = "",
          "Receives `peer`'s send into the array.");
  m.def(
      "group_start",
      [] {
        check(chorusGroupStart());
        ++groupArrays.depth;
      },
      "Calls until group_end() are queued and issued together there (as NCCL's groups: one "
      "thread can drive several thread ranks, or post a send and a receive that need each "
      "other). Their arrays are kept alive until group_end().");
  m.def(
      "group_end",
      [] {
        chorusResult_t r;
        {
          py::gil_scoped_release nogil;
          r = chorusGroupEnd();
        }
        if (groupArrays.depth > 0 && --groupArrays.depth == 0) {
          for (PyObject* o : groupArrays.held) Py_DECREF(o);
          groupArrays.held.clear();
        }
        check(r);
      },
      "Issues the calls queued since group_start() and returns when they are done.");
}

}  // namespace
}  // namespace chorus::python

PYBIND11_MODULE(_chorus, m) {
  using namespace chorus;
  using namespace chorus::python;
  m.doc() = "Chorus's C++ library (use the chorus package, which wraps it).";
  m.attr("version") = std::to_string(CHORUS_MAJOR) + "." + std::to_string(CHORUS_MINOR) + "." +
                      std::to_string(CHORUS_PATCH);

  py::class_<Diagnostic>(m, "Diagnostic",
                         "One finding: a code (E301), where (file, line, rank, tb, step) and "
                         "what. str() gives the compiler-style line.")
      .def_property_readonly("code", [](const Diagnostic& d) { return std::string(d.id()); })
      .def_property_readonly("name",
                             [](const Diagnostic& d) { return std::string(diagInfo(d.code).slug); })
      .def_property_readonly("severity",
                             [](const Diagnostic& d) { return severityName(d.severity); })
      .def_property_readonly("file", [](const Diagnostic& d) { return d.loc.file; })
      .def_property_readonly("line", [](const Diagnostic& d) { return d.loc.line; })
      .def_property_readonly("column", [](const Diagnostic& d) { return d.loc.column; })
      .def_property_readonly("rank", [](const Diagnostic& d) { return d.loc.rank; })
      .def_property_readonly("tb", [](const Diagnostic& d) { return d.loc.tb; })
      .def_property_readonly("step", [](const Diagnostic& d) { return d.loc.step; })
      .def_property_readonly("message", [](const Diagnostic& d) { return d.message; })
      .def("__str__", &Diagnostic::format)
      .def("__repr__",
           [](const Diagnostic& d) { return "<chorus.Diagnostic " + d.format() + ">"; });

  py::class_<python::Algorithm>(m, "Algorithm")
      .def_property_readonly("name", [](const python::Algorithm& a) { return a.ir->name; })
      .def_property_readonly("collective",
                             [](const python::Algorithm& a) { return a.ir->collectiveName; })
      .def_property_readonly("ranks", [](const python::Algorithm& a) { return a.ir->ngpus; })
      .def_property_readonly(
          "protocol",
          [](const python::Algorithm& a) { return std::string(ir::protocolName(a.ir->protocol)); })
      .def_property_readonly("channels", [](const python::Algorithm& a) { return a.ir->nchannels; })
      .def_property_readonly("chunks",
                             [](const python::Algorithm& a) { return a.ir->nchunksPerLoop; })
      .def_property_readonly("slice_bytes",
                             [](const python::Algorithm& a) { return a.ir->sliceBytes; })
      .def_property_readonly("inplace", [](const python::Algorithm& a) { return a.ir->inplace; })
      .def_property_readonly("outofplace",
                             [](const python::Algorithm& a) { return a.ir->outofplace; })
      .def_property_readonly("notes", [](const python::Algorithm& a) { return a.notes; })
      .def_property_readonly("spec", [](const python::Algorithm& a) { return a.spec; })
      .def_property_readonly("count_quantum",
                             [](const python::Algorithm& a) { return ir::countQuantum(*a.ir); })
      .def("stats", &stats)
      .def("xml", [](const python::Algorithm& a) { return ir::writeXml(*a.ir); })
      .def("json", [](const python::Algorithm& a) { return ir::writeJson(*a.ir); })
      .def("verify", &verifyAlgorithm, py::arg("target_msccl") = false,
           py::arg("spec") = py::none())
      .def("run", &run, py::arg("inputs") = py::none(), py::arg("count") = 0,
           py::arg("dtype") = "float32", py::arg("op") = "sum", py::arg("inplace") = py::none(),
           py::arg("spec") = py::none())
      .def("simulate", &simulate, py::arg("topo"), py::arg("bytes"), py::arg("element_size"),
           py::arg("inplace"), py::arg("slice_bytes"), py::arg("parts"), py::arg("slots"),
           py::arg("trace"), py::arg("timeline_step"));

  m.def("load", [](const std::string& path) {
    return fromRead(ir::readAlgorithmFile(path, workflows::readOptions()), path);
  });
  m.def("loads", [](const std::string& text, const std::string& name) {
    auto first = text.find_first_not_of(" \t\r\n");
    bool json = first != std::string::npos && text[first] == '{';
    if (json && ir::mscclpp::looksLikePlan(text))
      return fromRead(verify::planFiles().lower(text, name), name);
    return fromRead(
        json ? ir::readJson(text, name) : ir::readXml(text, name, compiler::readOptions()), name);
  });
  m.def(
      "verify_plan",
      [](const std::string& text, const std::string& name) {
        // An MSCCL++ plan's proof, and whether it runs (as chorus verify).
        DiagnosticList all;
        ir::mscclpp::PlanReadResult read = ir::mscclpp::readPlan(text, name);
        all.append(read.diagnostics);
        bool proven = false;
        size_t steps = 0;
        if (read.plan) {
          verify::PlanReport rep = verify::verifyPlan(*read.plan, name);
          all.append(rep.diagnostics);
          proven = rep.correct() && rep.semanticsChecked;
          if (rep.correct()) {
            verify::PlanLowering low = verify::lowerPlan(*read.plan, name);
            for (const Diagnostic& d : low.diagnostics.items())
              if (d.code == DiagCode::kPlanNotRunnable) all.add(d.code, d.loc, d.message);
            if (low.algorithm) steps = low.algorithm->totalSteps();
          }
        }
        all.sort();
        py::dict out;
        out["read"] = read.plan.has_value();
        out["correct"] = read.plan.has_value() && !all.hasErrors();
        out["proven"] = proven && !all.hasErrors();
        out["steps"] = steps;
        out["text"] = read.plan ? ir::mscclpp::writePlan(*read.plan) : std::string();
        out["diagnostics"] = all.items();
        return out;
      },
      py::arg("text"), py::arg("name"),
      "Reads and proves an MSCCL++ execution plan: {read, correct, proven, steps (of the "
      "two-sided form that runs; 0: it cannot), diagnostics, text (the plan as the DSL "
      "writes it)}.");
  m.def("topology", &topology);
  m.def("presets", [] {
    py::list out;
    for (const topo::PresetInfo& p : topo::presets()) {
      py::dict d;
      d["name"] = p.name;
      d["arguments"] = p.arguments;
      d["description"] = p.description;
      out.append(d);
    }
    return out;
  });
  m.def("programs", [] {
    py::list out;
    for (const lang::ProgramEntry& e : lang::programs()) {
      py::dict d;
      d["name"] = e.name;
      d["collective"] = e.collective;
      d["description"] = e.description;
      d["ranks"] = e.ranks;
      d["options"] = e.options;
      out.append(d);
    }
    return out;
  });
  // gen()'s options: a program's name and the options a user gives it.
  py::class_<lang::ProgramOptions>(m, "GenArgs")
      .def(py::init<>())
      .def_readwrite("name", &lang::ProgramOptions::name)
      .def_readwrite("ranks", &lang::ProgramOptions::ranks)
      .def_readwrite("instances", &lang::ProgramOptions::instances)
      .def_readwrite("blocked_instances", &lang::ProgramOptions::blockedInstances)
      .def_readwrite("protocol", &lang::ProgramOptions::protocol)
      .def_readwrite("inplace", &lang::ProgramOptions::inplace)
      .def_readwrite("gpus_per_node", &lang::ProgramOptions::gpusPerNode)
      .def_readwrite("channels", &lang::ProgramOptions::channels)
      .def_readwrite("chunk_factor", &lang::ProgramOptions::chunkFactor)
      .def_readwrite("root", &lang::ProgramOptions::root)
      .def_readwrite("slice_bytes", &lang::ProgramOptions::sliceBytes);
  m.def("gen", &gen);

  py::class_<workflows::SynthArgs>(m, "SynthArgs")
      .def(py::init<>())
      .def_readwrite("collective", &workflows::SynthArgs::collective)
      .def_readwrite("topo", &workflows::SynthArgs::topo)
      .def_readwrite("ranks", &workflows::SynthArgs::ranks)
      .def_readwrite("root", &workflows::SynthArgs::root)
      .def_readwrite("bound_only", &workflows::SynthArgs::boundOnly)
      .def_readwrite("name", &workflows::SynthArgs::name)
      .def_readwrite("protocol", &workflows::SynthArgs::protocol)
      .def_readwrite("inplace", &workflows::SynthArgs::inplace)
      .def_readwrite("max_pieces", &workflows::SynthArgs::maxPieces)
      .def_readwrite("instances", &workflows::SynthArgs::instances)
      .def_readwrite("size", &workflows::SynthArgs::size)
      .def_readwrite("method", &workflows::SynthArgs::method)
      .def_readwrite("trees", &workflows::SynthArgs::trees)
      .def_readwrite("headroom", &workflows::SynthArgs::headroom)
      .def_readwrite("time_budget", &workflows::SynthArgs::timeBudget)
      .def_readwrite("target", &workflows::SynthArgs::target);
  m.def("synthesize", &synthesize);
  py::class_<workflows::ReportArgs>(m, "ReportArgs")
      .def(py::init<>())
      .def_readwrite("files", &workflows::ReportArgs::files)
      .def_readwrite("topo", &workflows::ReportArgs::topo)
      .def_readwrite("perf", &workflows::ReportArgs::perf)
      .def_readwrite("title", &workflows::ReportArgs::title)
      .def_readwrite("bytes", &workflows::ReportArgs::bytes)
      .def_readwrite("min_bytes", &workflows::ReportArgs::minBytes)
      .def_readwrite("max_bytes", &workflows::ReportArgs::maxBytes)
      .def_readwrite("factor", &workflows::ReportArgs::factor)
      .def_readwrite("detail_steps", &workflows::ReportArgs::detailSteps)
      .def_readwrite("detail_ranks", &workflows::ReportArgs::detailRanks);
  m.def("report", &reportHtml);
  bindComm(m);

  py::class_<python::Program>(m, "Program")
      .def(py::init([](const std::string& name, const std::string& collective, int ranks,
                       int chunkFactor, bool inplace, const std::string& protocol, int instances,
                       bool blocked, int root, int gpusPerNode, int channels, bool pairTbs,
                       const std::string& file, int line) {
        lang::ProgramOptions o;
        o.name = name;
        o.collective = collective;
        o.ranks = ranks;
        o.chunkFactor = chunkFactor;
        o.inplace = inplace;
        o.protocol = protocol;
        o.instances = instances;
        o.blockedInstances = blocked;
        o.root = root;
        o.gpusPerNode = gpusPerNode;
        o.channels = channels;
        o.pairThreadblocks = pairTbs;
        return python::Program{std::make_shared<lang::Program>(o, lang::Where(file.c_str(), line))};
      }))
      .def("chunk",
           [](python::Program& p, int rank, int buffer, int index, int size,
              const std::string& file, int line) {
             return python::Chunk{
                 p.p, p.p->chunk(rank, buffer, index, size, lang::Where(file.c_str(), line))};
           })
      .def("scratch",
           [](python::Program& p, const std::string& name) { return p.p->scratch(name); })
      .def("group",
           [](python::Program& p, const std::vector<python::Chunk>& parts, const std::string& file,
              int line) {
             std::vector<lang::Chunk> cs;
             for (const python::Chunk& c : parts) cs.push_back(c.c);
             return python::Chunk{p.p, p.p->group(cs, lang::Where(file.c_str(), line))};
           })
      .def("precondition",
           [](python::Program& p, const std::vector<std::pair<int, int>>& present,
              const std::string& file, int line) {
             std::vector<lang::Source> s;
             for (auto [r, i] : present) s.push_back({r, i});
             p.p->precondition(s, lang::Where(file.c_str(), line));
           })
      .def("postcondition",
           [](python::Program& p, int rank, int index,
              const std::vector<std::pair<int, int>>& holds, const std::string& file, int line) {
             std::vector<lang::Source> s;
             for (auto [r, i] : holds) s.push_back({r, i});
             p.p->postcondition(rank, index, s, lang::Where(file.c_str(), line));
           })
      .def("require",
           [](python::Program& p, bool ok, const std::string& message, const std::string& file,
              int line) { return p.p->require(ok, message, lang::Where(file.c_str(), line)); })
      .def_property_readonly("problems", [](const python::Program& p) { return problems(*p.p); })
      .def_property_readonly("operations",
                             [](const python::Program& p) { return p.p->operations().size(); })
      .def_property_readonly("input_chunks",
                             [](const python::Program& p) { return p.p->inputChunks(); })
      .def_property_readonly("output_chunks",
                             [](const python::Program& p) { return p.p->outputChunks(); })
      .def("compile", &compileProgram, py::arg("verify") = true);

  py::class_<python::Chunk>(m, "Chunk")
      .def_property_readonly("rank", [](const python::Chunk& c) { return c.c.rank(); })
      .def_property_readonly("buffer", [](const python::Chunk& c) { return c.c.buffer(); })
      .def_property_readonly("index", [](const python::Chunk& c) { return c.c.index(); })
      .def_property_readonly("size", [](const python::Chunk& c) { return c.c.size(); })
      .def_property_readonly("valid", [](const python::Chunk& c) { return c.c.valid(); })
      .def("copy",
           [](const python::Chunk& c, int rank, int buffer, int index, int sendTb, int recvTb,
              int channel, const std::string& file, int line) {
             return python::Chunk{c.p, c.c.copy(rank, buffer, index, hints(sendTb, recvTb, channel),
                                                lang::Where(file.c_str(), line))};
           })
      .def("reduce",
           [](const python::Chunk& c, const python::Chunk& other, int sendTb, int recvTb,
              int channel, const std::string& file, int line) {
             return python::Chunk{c.p, c.c.reduce(other.c, hints(sendTb, recvTb, channel),
                                                  lang::Where(file.c_str(), line))};
           })
      .def("reduce_to",
           [](const python::Chunk& c, const python::Chunk& other, int buffer, int index, int sendTb,
              int recvTb, int channel, const std::string& file, int line) {
             return python::Chunk{c.p,
                                  c.c.reduce(other.c, buffer, index, hints(sendTb, recvTb, channel),
                                             lang::Where(file.c_str(), line))};
           })
      .def("split", [](const python::Chunk& c, int parts, const std::string& file, int line) {
        std::vector<python::Chunk> out;
        for (const lang::Chunk& part : c.c.split(parts, lang::Where(file.c_str(), line)))
          out.push_back(python::Chunk{c.p, part});
        return out;
      });
}
