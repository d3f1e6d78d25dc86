// util/: reading files that may be anything, atomic file writes and JSON strings.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "util/file.hpp"
#include "util/json.hpp"
#include "util/xml.hpp"

namespace util = tnbc::util;

TEST_CASE("xml_escape escapes markup and replaces bytes XML cannot hold", "[util]") {
  CHECK(util::xml_escape("a<b>&\"c'") == "a&lt;b&gt;&amp;&quot;c'");
  CHECK(util::xml_escape("tab\there\x01\x7f\xc3\xa9") == "tab?here????");
  CHECK(util::xml_escape("") == "");
}

TEST_CASE("json_escape escapes quotes, backslashes, control characters and non-ASCII bytes", "[util]") {
  CHECK(util::json_escape("a\"b\\c\n\x01") == "a\\\"b\\\\c\\n\\u0001");
  CHECK(util::json_escape("\t\r\x7f") == "\\t\\r\\u007f");
  // Not valid UTF-8 (a symbol or path may hold anything): every byte becomes \u00XX.
  CHECK(util::json_escape("caf\xc3\xa9 \xff") == "caf\\u00c3\\u00a9 \\u00ff");
  CHECK(util::json_string("x\"y") == "\"x\\\"y\"");
  CHECK(util::json_string("") == "\"\"");
}

TEST_CASE("write_file_atomic writes the whole content and leaves no temporary", "[util]") {
  char dir[] = "/tmp/tnbc_atomic_XXXXXX";
  REQUIRE(mkdtemp(dir));
  std::string path = std::string(dir) + "/s.0.json";
  REQUIRE_FALSE(util::write_file_atomic(path, "{\"x\":1}\n").has_value());
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  CHECK(ss.str() == "{\"x\":1}\n");
  unlink(path.c_str());
  CHECK(rmdir(dir) == 0);  // fails if a temporary file was left behind
}

TEST_CASE("write_file_atomic reports a missing folder", "[util]") {
  auto err = util::write_file_atomic("/nonexistent-tnbc-dir/s.json", "x");
  REQUIRE(err.has_value());
  CHECK(err->find("cannot create /nonexistent-tnbc-dir/s.json.tmp.") == 0);
  CHECK(err->find("No such file or directory") != std::string::npos);
}

namespace {

// A fresh folder under /tmp, removed with its content at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/tnbc_util_XXXXXX";
    REQUIRE(mkdtemp(name));
    path = name;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::string read_whole(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("make_dirs makes missing parents, accepts what exists, names a file in the way", "[util]") {
  TempDir d;
  const std::string deep = d.path + "/a/b/c";
  CHECK_FALSE(util::make_dirs(deep).has_value());
  struct stat st {};
  REQUIRE(stat(deep.c_str(), &st) == 0);
  CHECK(S_ISDIR(st.st_mode));
  CHECK_FALSE(util::make_dirs(deep).has_value());  // already there: fine (ranks race to make it)
  { std::ofstream(d.path + "/file") << "x"; }
  const auto err = util::make_dirs(d.path + "/file/sub");
  REQUIRE(err.has_value());
  CHECK(err->find("cannot create " + d.path + "/file/sub") == 0);
}

TEST_CASE("read_file reads a regular file and names what else it finds", "[util]") {
  TempDir d;
  const std::string file = d.path + "/f";
  { std::ofstream(file) << "hello\n"; }
  std::string out = "stale";
  CHECK_FALSE(util::read_file(file, 6, out).has_value());
  CHECK(out == "hello\n");
  CHECK(util::read_file(file, 5, out) == file + ": 6 bytes, larger than the limit of 5");

  CHECK(util::read_file(d.path, 1 << 20, out) == d.path + ": is a directory");
  CHECK(util::read_file("/dev/zero", 1 << 20, out) == "/dev/zero: not a regular file (a character device)");
  CHECK(util::read_file(d.path + "/none", 1 << 20, out) ==
        d.path + "/none: cannot open: No such file or directory");
  const std::string loop = d.path + "/loop";
  REQUIRE(symlink(loop.c_str(), loop.c_str()) == 0);
  CHECK(util::read_file(loop, 1 << 20, out) ==
        loop + ": cannot open: Too many levels of symbolic links");

  // A FIFO without a writer: a blocking open would wait forever.
  const std::string fifo = d.path + "/fifo";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  auto start = std::chrono::steady_clock::now();
  CHECK(util::read_file(fifo, 1 << 20, out) == fifo + ": not a regular file (a FIFO)");
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
}

TEST_CASE("InputFile reads a header first, then the rest, never past the size it checked", "[util]") {
  TempDir d;
  const std::string file = d.path + "/f";
  { std::ofstream(file) << "MAGICbody"; }
  util::InputFile in(file, 100);
  REQUIRE(in.error().empty());
  CHECK(in.size() == 9);
  std::string out;
  REQUIRE(in.read(5, out));
  CHECK(out == "MAGIC");
  { std::ofstream(file, std::ios::app) << "grown"; }  // grew after the check: not read
  REQUIRE(in.read(1000, out));
  CHECK(out == "MAGICbody");
  util::InputFile missing(d.path + "/none", 100);
  CHECK_FALSE(missing.read(1, out));
  CHECK(missing.error() == d.path + "/none: cannot open: No such file or directory");
}

TEST_CASE("write_file_atomic follows no link planted at a temporary name or at the file", "[util]") {
  TempDir d;
  const std::string victim = d.path + "/victim";
  { std::ofstream(victim) << "precious\n"; }
  const std::string path = d.path + "/0.tnbct";
  // The name the former scheme (<path>.tmp.<pid>) used in this process, and its neighbours in
  // case a pid is reused: each a link to a file the user can write.
  for (int pid = std::max(1, static_cast<int>(getpid()) - 8); pid <= getpid() + 8; ++pid)
    REQUIRE(symlink(victim.c_str(), (path + ".tmp." + std::to_string(pid)).c_str()) == 0);
  REQUIRE_FALSE(util::write_file_atomic(path, "trace\n").has_value());
  CHECK(read_whole(victim) == "precious\n");
  CHECK(read_whole(path) == "trace\n");

  // A link at the final name is replaced, not written through.
  const std::string linked = d.path + "/1.tnbct";
  REQUIRE(symlink(victim.c_str(), linked.c_str()) == 0);
  REQUIRE_FALSE(util::write_file_atomic(linked, "trace\n").has_value());
  CHECK(read_whole(victim) == "precious\n");
  struct stat st {};
  REQUIRE(lstat(linked.c_str(), &st) == 0);
  CHECK(S_ISREG(st.st_mode));
  CHECK((st.st_mode & 0777) == (0644 & ~[] { mode_t m = umask(0); umask(m); return m; }()));
}

TEST_CASE("write_file_atomic uses a new unguessable temporary name each time", "[util]") {
  TempDir d;
  // Through a folder that refuses the rename, the temporary's name shows in the message.
  const std::string path = d.path + "/dir";
  REQUIRE(mkdir(path.c_str(), 0755) == 0);
  REQUIRE(mkdir((path + "/x").c_str(), 0755) == 0);  // renaming a file over a folder fails
  auto a = util::write_file_atomic(path, "x"), b = util::write_file_atomic(path, "x");
  REQUIRE(a.has_value());
  REQUIRE(b.has_value());
  const std::string prefix = "cannot rename " + path + ".tmp.";
  REQUIRE(a->rfind(prefix, 0) == 0);
  REQUIRE(b->rfind(prefix, 0) == 0);
  CHECK(a->substr(prefix.size(), 16) != b->substr(prefix.size(), 16));
  CHECK(a->substr(prefix.size(), 16) != std::to_string(getpid()));
  CHECK(rmdir((path + "/x").c_str()) == 0);
  CHECK(rmdir(path.c_str()) == 0);  // and no temporary was left behind
  CHECK(rmdir(d.path.c_str()) == 0);
}

TEST_CASE("check_private_folder refuses folders others can write to or own", "[util]") {
  TempDir d;
  CHECK_FALSE(util::check_private_folder(d.path).has_value());
  REQUIRE(chmod(d.path.c_str(), 0777) == 0);
  CHECK(util::check_private_folder(d.path) ==
        d.path + " is writable by others (mode 0777): they could plant files or links in it; "
                 "chmod go-w " + d.path);
  REQUIRE(chmod(d.path.c_str(), 0770) == 0);
  CHECK(util::check_private_folder(d.path) ==
        d.path + " is writable by its group (mode 0770): they could plant files or links in it; "
                 "chmod go-w " + d.path);
  REQUIRE(chmod(d.path.c_str(), 01777) == 0);  // sticky: nobody replaces another user's files
  CHECK_FALSE(util::check_private_folder(d.path).has_value());
  REQUIRE(chmod(d.path.c_str(), 0700) == 0);

  const std::string file = d.path + "/f";
  { std::ofstream(file) << "x"; }
  CHECK(util::check_private_folder(file) == file + " is not a folder");
  const std::string loop = d.path + "/loop";
  REQUIRE(symlink(loop.c_str(), loop.c_str()) == 0);
  CHECK(util::check_private_folder(loop) == loop + ": Too many levels of symbolic links");
  // Owned by another user (root's /, or a user's folder when the tests run as root).
  const std::string other = geteuid() == 0 ? std::string() : "/";
  if (!other.empty())
    CHECK(util::check_private_folder(other)->find(" is owned by user 0, not by this user") !=
          std::string::npos);
  else if (chown(d.path.c_str(), 65534, 65534) == 0)
    CHECK(util::check_private_folder(d.path) ==
          d.path + " is owned by user 65534, not by this user (0): another user could replace its files");
}
