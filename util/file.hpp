// Files tnbc reads and writes: traces, plans, topology files and statistics.
//
// Reading: every file a user can name (TNBC_PLAN, TNBC_NUMA_TOPOLOGY, trace files given to
// tnbc-order) may be anything: a directory, a FIFO, /dev/zero, a symlink loop, a sparse file of
// gigabytes.  InputFile opens without blocking, requires a regular file, checks the size bound
// before reading a byte, and names the step that failed; the caller may read a header first and
// check its magic number before reading the rest.
//
// Writing: write_file_atomic never leaves half a file under the final name and never follows a
// link planted where it creates its temporary file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tnbc::util {

/// A file opened for reading, known to be a regular file of at most `max_bytes` bytes.
class InputFile {
 public:
  /// Opens `path` with O_RDONLY | O_NONBLOCK | O_CLOEXEC (a FIFO or device cannot block the
  /// open), then requires, from fstat, a regular file no larger than `max_bytes`.  On failure
  /// error() says why, e.g. "<path>: is a directory", "<path>: not a regular file (a FIFO)",
  /// "<path>: cannot open: Too many levels of symbolic links", "<path>: 3221225472 bytes, larger
  /// than the limit of 4294967296".
  InputFile(const std::string& path, std::uint64_t max_bytes);
  ~InputFile();
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  /// Why the file cannot be read: "<path>: <problem>"; empty while it can.
  const std::string& error() const { return error_; }
  /// Size in bytes when opened (fstat); reading never goes beyond it.
  std::uint64_t size() const { return size_; }
  /// Appends the next `n` bytes (fewer at the end of the file or of size()) to `out`.  False,
  /// with error() set, on a read error or when the file could not be opened.
  bool read(std::uint64_t n, std::string& out);

 private:
  std::string path_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t pos_ = 0;
  std::string error_;
};

/// Reads all of `path` into `out` through InputFile.  Returns its error, or nullopt.
std::optional<std::string> read_file(const std::string& path, std::uint64_t max_bytes,
                                     std::string& out);

/// Writes `content` to `path` atomically: a temporary file in the same folder, with a random
/// name (`<path>.tmp.<16 hex digits>`) created with O_EXCL | O_NOFOLLOW so that no file or
/// link planted there is followed or reused, fsync'd and renamed over `path` (which replaces a
/// link at `path` rather than writing through it).  Mode 0644 less the umask.  Returns an error
/// message naming the file, or nullopt; on error no temporary file is left behind.
std::optional<std::string> write_file_atomic(const std::string& path, std::string_view content);

/// Creates the folder `path` and its missing parents (mode 0755 less the umask); an existing
/// folder is fine, so ranks may race to create the same one.  Returns the problem, or nullopt.
std::optional<std::string> make_dirs(const std::string& path);

/// Checks that the folder `path` is safe to create files in for this user, as ssh checks its
/// files: it must be a folder owned by the effective user, and not writable by group or others
/// unless the sticky bit is set (then nobody can remove or replace another user's files).
/// Returns the problem, naming the folder and what to do, or nullopt.
std::optional<std::string> check_private_folder(const std::string& path);

}  // namespace tnbc::util
