// util/: atomic file writes and JSON strings.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "util/file.hpp"
#include "util/json.hpp"

namespace util = tnbc::util;

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
