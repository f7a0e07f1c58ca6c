#include "runtime/transport/shared_buffers.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <random>
#include <string>

#include "core/check.h"

namespace chorus::runtime::shared_buffers {

namespace {

size_t pageBytes() { return static_cast<size_t>(::sysconf(_SC_PAGESIZE)); }

// Touches every page of [p, p + bytes) from this process: under this
// machine's hypervisor the first access to a page from each process costs
// about 23 us even when it is mapped (docs/processes.md), which must not
// land on a collective's critical path.
void touch(const void* p, size_t bytes, bool write) {
  auto* c = static_cast<volatile unsigned char*>(const_cast<void*>(p));
  for (size_t i = 0; i < bytes; i += pageBytes()) {
    unsigned char v = c[i];
    if (write) c[i] = v;
  }
}

struct Owned {
  SharedRegion region;
  size_t mapped = 0;  // bytes mapped (whole pages)
};

struct Registry {
  std::atomic<uint64_t> generation{1};
  std::mutex mu;
  std::map<uintptr_t, Owned> byBase;  // guarded by mu
  uint64_t nonce = 0;
  uint64_t next = 0;
};

Registry& registry() {
  static Registry* r = [] {
    auto* reg = new Registry();  // never destroyed: frees may come at exit
    std::random_device rd;
    reg->nonce = (uint64_t{rd()} << 32) & ~uint64_t{0xffffffff};
    return reg;
  }();
  return *r;
}

}  // namespace

Result<void*> allocate(size_t bytes) {
  if (bytes == 0) return Status(StatusCode::kInvalidArgument, "cannot allocate 0 bytes");
  size_t mapped = (bytes + pageBytes() - 1) / pageBytes() * pageBytes();
  int fd = ::memfd_create("chorus-buffer", MFD_CLOEXEC);
  if (fd < 0)
    return Status(StatusCode::kIoError, std::string("memfd_create: ") + std::strerror(errno));
  if (::ftruncate(fd, static_cast<off_t>(mapped)) != 0) {
    Status st(StatusCode::kIoError, "cannot size shared memory of " + std::to_string(mapped) +
                                        " bytes: " + std::strerror(errno));
    ::close(fd);
    return st;
  }
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    Status st(StatusCode::kIoError, std::string("mmap of shared memory: ") + std::strerror(errno));
    ::close(fd);
    return st;
  }
  touch(p, mapped, /*write=*/true);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  Owned o;
  o.region.base = reinterpret_cast<uintptr_t>(p);
  o.region.bytes = mapped;
  o.region.fd = fd;
  o.region.id = reg.nonce | (++reg.next & 0xffffffff);
  if (o.region.id == 0) o.region.id = 1;
  o.mapped = mapped;
  reg.byBase[reinterpret_cast<uintptr_t>(p)] = o;
  reg.generation.fetch_add(1, std::memory_order_release);
  return p;
}

Status release(void* p) {
  Registry& reg = registry();
  Owned o;
  {
    std::lock_guard<std::mutex> lock(reg.mu);
    auto it = reg.byBase.find(reinterpret_cast<uintptr_t>(p));
    if (it == reg.byBase.end())
      return Status(StatusCode::kInvalidArgument,
                    "this pointer was not allocated by chorusMemAlloc (or was freed already)");
    o = it->second;
    reg.byBase.erase(it);
    reg.generation.fetch_add(1, std::memory_order_release);
  }
  ::munmap(p, o.mapped);
  ::close(o.region.fd);
  return Status::ok();
}

std::optional<SharedRegion> find(const void* p, size_t bytes) {
  auto at = reinterpret_cast<uintptr_t>(p);
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  auto it = reg.byBase.upper_bound(at);
  if (it == reg.byBase.begin()) return std::nullopt;
  --it;
  const SharedRegion& r = it->second.region;
  if (at + bytes > r.base + r.bytes || at + bytes < at) return std::nullopt;
  return r;
}

uint64_t generation() { return registry().generation.load(std::memory_order_acquire); }

size_t live() {
  Registry& reg = registry();
  std::lock_guard<std::mutex> lock(reg.mu);
  return reg.byBase.size();
}

Block& Block::operator=(Block&& o) noexcept {
  if (this != &o) {
    clear();
    heap_ = std::move(o.heap_);
    data_ = std::exchange(o.data_, nullptr);
    size_ = std::exchange(o.size_, 0);
    mappable_ = std::exchange(o.mappable_, false);
  }
  return *this;
}

void Block::clear() {
  if (mappable_) CHORUS_CHECK(release(data_).isOk(), "a mappable block went missing");
  heap_.clear();
  data_ = nullptr;
  size_ = 0;
  mappable_ = false;
}

Status Block::assign(size_t n, bool mappable) {
  clear();
  if (mappable && n > 0) {
    auto p = allocate(n);
    if (!p.isOk()) return p.status();
    data_ = static_cast<unsigned char*>(p.value());
    mappable_ = true;
  } else {
    heap_.assign(n, 0);
    data_ = heap_.data();
  }
  size_ = n;
  return Status::ok();
}

PeerMapping::~PeerMapping() {
  if (data_ != nullptr)
    ::munmap(const_cast<unsigned char*>(data_), static_cast<size_t>(region_.bytes));
}

std::shared_ptr<const PeerMapping> PeerMapping::get(int pid, const SharedRegion& r,
                                                    std::string* why) {
  // The most recently used mappings first; a region is known by its owner
  // and its id (fds and addresses are reused after a free, ids are not).
  struct Cache {
    std::mutex mu;
    std::list<std::pair<std::pair<int, uint64_t>, std::shared_ptr<const PeerMapping>>> lru;
  };
  static Cache* cache = new Cache();  // never destroyed (mappings die with the process)
  constexpr size_t kKeep = 64;
  std::lock_guard<std::mutex> lock(cache->mu);
  for (auto it = cache->lru.begin(); it != cache->lru.end(); ++it) {
    if (it->first != std::make_pair(pid, r.id)) continue;
    cache->lru.splice(cache->lru.begin(), cache->lru, it);
    return cache->lru.front().second;
  }
  std::string path = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(r.fd);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (why) *why = "cannot open " + path + ": " + std::strerror(errno);
    return nullptr;
  }
  // The fd is the region's as long as a message refers to it (the owner
  // frees nothing a call in flight uses); a smaller file would be a bug
  // or a stray descriptor, and mapping past its end would fault.
  struct stat st {};
  if (::fstat(fd, &st) != 0 || static_cast<uint64_t>(st.st_size) < r.bytes) {
    if (why) *why = path + " is not the region a message named";
    ::close(fd);
    return nullptr;
  }
  void* p =
      ::mmap(nullptr, static_cast<size_t>(r.bytes), PROT_READ, MAP_SHARED | MAP_POPULATE, fd, 0);
  int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    if (why) *why = "cannot map " + path + ": " + std::strerror(err);
    return nullptr;
  }
  touch(p, static_cast<size_t>(r.bytes), /*write=*/false);
  std::shared_ptr<PeerMapping> m(new PeerMapping());
  m->region_ = r;
  m->data_ = static_cast<const unsigned char*>(p);
  cache->lru.emplace_front(std::make_pair(pid, r.id), m);
  if (cache->lru.size() > kKeep) cache->lru.pop_back();
  return m;
}

}  // namespace chorus::runtime::shared_buffers
