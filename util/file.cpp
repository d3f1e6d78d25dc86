#include "file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace tnbc::util {

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
