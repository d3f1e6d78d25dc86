#include "file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace tnbc::util {
namespace {

// What a file that is not a regular one is, for messages.
const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a file";
}

}  // namespace

InputFile::InputFile(const std::string& path, std::uint64_t max_bytes) : path_(path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd_ < 0) {
    error_ = path + ": cannot open: " + std::strerror(errno);
    return;
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    error_ = path + ": cannot stat: " + std::strerror(errno);
  } else if (S_ISDIR(st.st_mode)) {
    error_ = path + ": is a directory";
  } else if (!S_ISREG(st.st_mode)) {
    error_ = path + ": not a regular file (" + kind_of(st.st_mode) + ")";
  } else if (static_cast<std::uint64_t>(st.st_size) > max_bytes) {
    error_ = path + ": " + std::to_string(st.st_size) + " bytes, larger than the limit of " +
             std::to_string(max_bytes);
  } else {
    size_ = static_cast<std::uint64_t>(st.st_size);
    return;
  }
  ::close(fd_);
  fd_ = -1;
}

InputFile::~InputFile() {
  if (fd_ >= 0) ::close(fd_);
}

bool InputFile::read(std::uint64_t n, std::string& out) {
  if (fd_ < 0) return false;
  n = std::min(n, size_ - pos_);
  const std::size_t start = out.size();
  out.resize(start + n);
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd_, out.data() + start + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      error_ = path_ + ": cannot read: " + std::strerror(errno);
      out.resize(start);
      return false;
    }
    if (r == 0) break;  // shrank since fstat: the caller's format checks see a short file
    got += static_cast<std::size_t>(r);
  }
  out.resize(start + got);
  pos_ += got;
  return true;
}

std::optional<std::string> read_file(const std::string& path, std::uint64_t max_bytes,
                                     std::string& out) {
  InputFile file(path, max_bytes);
  out.clear();
  if (!file.read(file.size(), out)) return file.error();
  return std::nullopt;
}

std::optional<std::string> write_file_atomic(const std::string& path, std::string_view content) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return "cannot create " + tmp + ": " + std::strerror(errno);
  const char* p = content.data();
  std::size_t left = content.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : ENOSPC;
      ::close(fd);
      ::unlink(tmp.c_str());
      return "cannot write " + tmp + ": " + std::strerror(e);
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  int sync_rc = ::fsync(fd);
  int sync_errno = errno;
  int close_rc = ::close(fd);
  int close_errno = errno;
  if (sync_rc != 0 || close_rc != 0) {
    ::unlink(tmp.c_str());
    return "cannot write " + tmp + ": " + std::strerror(sync_rc != 0 ? sync_errno : close_errno);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return "cannot rename " + tmp + " to " + path + ": " + std::strerror(e);
  }
  return std::nullopt;
}

}  // namespace tnbc::util
