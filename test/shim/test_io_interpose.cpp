// io_interpose.cpp: every interposed function hands its buffers to the mode before the real call,
// and none does while nothing is guarded.  This binary links io_interpose.cpp itself, so its own
// calls to write(), free()... reach the wrappers; the mode is a recorder.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shim/io_interpose.hpp"
#include "shim/mode.hpp"

namespace tnbc::shim {
namespace {

struct Released {
  const void* p;
  std::size_t n;
  ReleaseReason why;
};

// Records without allocating: free() itself comes through here.
class RecordingMode final : public Mode {
 public:
  std::string_view library() const override { return "test"; }
  void release_range(const void* p, std::size_t n, ReleaseReason why) override {
    int i = count_.fetch_add(1);
    if (i < kMax) log_[i] = {p, n, why};
  }
  void clear() { count_ = 0; }
  int count() const { return std::min(count_.load(), kMax); }
  bool saw(const void* p, std::size_t n, ReleaseReason why) const {
    for (int i = 0; i < count(); ++i)
      if (log_[i].p == p && log_[i].n >= n && log_[i].why == why) return true;
    return false;
  }

 private:
  static constexpr int kMax = 1024;
  Released log_[kMax];
  std::atomic<int> count_{0};
};

RecordingMode g_mode;

// Arms the wrappers for one scope.
struct Armed {
  Armed() {
    g_mode.clear();
    g_guarded_calls.store(1);
  }
  ~Armed() { g_guarded_calls.store(0); }
};

}  // namespace

Mode& mode() { return g_mode; }

}  // namespace tnbc::shim

using namespace tnbc::shim;

TEST_CASE("io_interpose: file I/O releases its buffer as I/O", "[io]") {
  char path[] = "/tmp/tnbc_io_XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  unlink(path);
  char a[100] = "hello", b[100];
  struct iovec iov[2] = {{a, 10}, {b, 20}};
  {
    Armed on;
    CHECK(write(fd, a, 50) == 50);
    CHECK(g_mode.saw(a, 50, ReleaseReason::io));
    CHECK(pwrite(fd, a, 40, 0) == 40);
    CHECK(g_mode.saw(a, 40, ReleaseReason::io));
    CHECK(pread(fd, b, 30, 0) == 30);
    CHECK(g_mode.saw(b, 30, ReleaseReason::io));
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(read(fd, b, 20) == 20);
    CHECK(g_mode.saw(b, 20, ReleaseReason::io));
    CHECK(writev(fd, iov, 2) == 30);
    CHECK(g_mode.saw(a, 10, ReleaseReason::io));
    CHECK(g_mode.saw(b, 20, ReleaseReason::io));
    CHECK(lseek(fd, 0, SEEK_SET) == 0);
    CHECK(readv(fd, iov, 2) == 30);
  }
  CHECK(std::memcmp(b, "hello", 5) != 0);  // readv put file bytes there: the real call ran
  close(fd);
}

TEST_CASE("io_interpose: the *64 names and stdio are caught", "[io]") {
  FILE* f = tmpfile();
  REQUIRE(f != nullptr);
  char a[64] = "abc", b[64] = {};
  {
    Armed on;
    CHECK(fwrite(a, 1, 64, f) == 64);
    CHECK(g_mode.saw(a, 64, ReleaseReason::io));
    CHECK(fflush(f) == 0);
    rewind(f);
    CHECK(fread(b, 2, 32, f) == 32);
    CHECK(g_mode.saw(b, 64, ReleaseReason::io));
    int fd = fileno(f);
    extern ssize_t pread64(int, void*, size_t, off_t);
    CHECK(pread64(fd, b, 8, 0) == 8);
    CHECK(g_mode.saw(b, 8, ReleaseReason::io));
  }
  CHECK(std::strcmp(b, "abc") == 0);
  fclose(f);
}

TEST_CASE("io_interpose: sockets release every buffer", "[io]") {
  int sv[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  char a[32] = "ping", b[32] = {}, c[8], d[8];
  {
    Armed on;
    CHECK(send(sv[0], a, 5, 0) == 5);
    CHECK(g_mode.saw(a, 5, ReleaseReason::io));
    CHECK(recv(sv[1], b, 5, 0) == 5);
    CHECK(g_mode.saw(b, 5, ReleaseReason::io));
    CHECK(sendto(sv[0], a, 4, 0, nullptr, 0) == 4);
    CHECK(recvfrom(sv[1], b, 4, 0, nullptr, nullptr) == 4);
    struct iovec iov[2] = {{a, 4}, {c, 8}};
    struct msghdr msg {};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    g_mode.clear();
    CHECK(sendmsg(sv[0], &msg, 0) == 12);
    CHECK(g_mode.saw(a, 4, ReleaseReason::io));
    CHECK(g_mode.saw(c, 8, ReleaseReason::io));
    struct iovec riov[1] = {{d, 8}};
    struct msghdr rmsg {};
    rmsg.msg_iov = riov;
    rmsg.msg_iovlen = 1;
    CHECK(recvmsg(sv[1], &rmsg, 0) == 8);
    CHECK(g_mode.saw(d, 8, ReleaseReason::io));
  }
  CHECK(std::strcmp(b, "ping") == 0);
  close(sv[0]);
  close(sv[1]);
}

TEST_CASE("io_interpose: free, realloc and munmap release memory", "[io]") {
  void* p = std::malloc(1000);
  void* q = std::malloc(2000);
  long ps = sysconf(_SC_PAGESIZE);
  void* m = mmap(nullptr, 2 * ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  {
    Armed on;
    std::free(p);
    CHECK(g_mode.saw(p, 1000, ReleaseReason::memory));
    void* q2 = std::realloc(q, 100000);
    CHECK(g_mode.saw(q, 2000, ReleaseReason::memory));
    // libucm (loaded with MPICH) patches our munmap and unmaps by system call: its event reports
    // it.  Open MPI loads no libucm here (its UCX components are plugins, loaded at MPI_Init if
    // at all): then our munmap is what runs.
    if (dlsym(RTLD_DEFAULT, "ucm_set_event_handler") != nullptr) CHECK(subscribe_memory_events());
    g_mode.clear();  // Catch's own frees fill the log
    CHECK(munmap(m, 2 * ps) == 0);
    CHECK(g_mode.saw(m, 2 * ps, ReleaseReason::memory));
    std::free(q2);
  }
}

TEST_CASE("io_interpose: nothing is released while nothing is guarded", "[io]") {
  g_mode.clear();
  char a[16] = "x";
  int fd = ::open("/dev/null", O_WRONLY);
  CHECK(write(fd, a, 16) == 16);
  close(fd);
  std::free(std::malloc(100));
  CHECK(g_mode.count() == 0);
}
