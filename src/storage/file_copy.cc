#include "storage/file_copy.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <vector>

#include "storage/fs.h"
#include "sys/syscalls.h"

namespace sandrun::storage {
namespace {

constexpr size_t kChunk = 64 * 1024;

Error CopyFailure(const char* call, const std::string& path, int err) {
  Error error = StorageError(call, path, err);
  // The destination's size limit (a tmpfs workspace, a full disk): the caller's "does not fit".
  error.kind = sys::WriteErrorKind(err);
  return error;
}

bool AllZero(const char* data, size_t size) {
  return std::all_of(data, data + size, [](char c) { return c == 0; });
}

// Tells `observe` about `count` zero bytes (a hole), a chunk at a time.
void ObserveZeros(const CopyObserver& observe, uint64_t count) {
  if (!observe) return;
  static const std::vector<char> kZeros(kChunk, 0);
  while (count > 0) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(count, kChunk));
    observe(kZeros.data(), n);
    count -= n;
  }
}

// The start of the next data extent at or after `pos`, or `size` when only a hole is left.
// lseek(2): SEEK_DATA fails with ENXIO past the last data; EINVAL means the file system
// cannot tell, and then everything counts as data.
Result<off_t> NextData(int fd, off_t pos, off_t size, const std::string& path) {
  const off_t data = lseek(fd, pos, SEEK_DATA);
  if (data >= 0) return std::min(data, size);
  const int err = LastErrno();
  if (err == ENXIO) return size;
  if (err == EINVAL) return pos;
  return CopyFailure("lseek(SEEK_DATA)", path, err);
}

// The end of the data extent that starts at `pos` (there is always a hole at end of file).
// Always past `pos`, so the copy loop moves on whatever lseek says.
off_t NextHole(int fd, off_t pos, off_t size) {
  const off_t hole = lseek(fd, pos, SEEK_HOLE);
  return hole <= pos ? size : std::min(hole, size);
}

Status PwriteAll(int fd, const char* data, size_t size, off_t offset, const std::string& path) {
  while (size > 0) {
    const ssize_t n = pwrite(fd, data, size, offset);
    if (n < 0 && LastErrno() == EINTR) continue;
    if (n < 0) return CopyFailure("pwrite", path, LastErrno());
    data += n;
    size -= static_cast<size_t>(n);
    offset += n;
  }
  return OkStatus();
}

// Copies [pos, end) of a data extent. Returns where it stopped: `end`, or earlier when the
// source turned out shorter than its st_size said.
Result<off_t> CopyExtent(int in, int out, off_t pos, off_t end, const std::string& path,
                         const CopyObserver& observe, std::vector<char>& buf) {
  while (pos < end) {
    const size_t want = static_cast<size_t>(std::min<off_t>(end - pos, kChunk));
    const ssize_t n = pread(in, buf.data(), want, pos);
    if (n < 0 && LastErrno() == EINTR) continue;
    if (n < 0) return CopyFailure("pread", path, LastErrno());
    if (n == 0) return pos;
    const size_t got = static_cast<size_t>(n);
    if (observe) observe(buf.data(), got);
    // Left unwritten, an all-zero chunk reads back as zeros from the hole ftruncate makes.
    if (!AllZero(buf.data(), got)) {
      if (Status s = PwriteAll(out, buf.data(), got, pos, path); !s.ok()) return s.error();
    }
    pos += n;
  }
  return pos;
}

}  // namespace

Result<CopiedFile> CopyFileKeepingHoles(int in, int out, uint64_t max_size, const std::string& path,
                                        const CopyObserver& observe) {
  struct stat st;
  if (fstat(in, &st) != 0) return CopyFailure("fstat", path, LastErrno());
  CopiedFile copied;
  copied.size = static_cast<uint64_t>(st.st_size);
  if (copied.size > max_size) {
    copied.too_large = true;
    return copied;
  }
  std::vector<char> buf(kChunk);
  const off_t size = st.st_size;
  off_t pos = 0;
  while (pos < size) {
    auto data = NextData(in, pos, size, path);
    if (!data.ok()) return data.error();
    ObserveZeros(observe, static_cast<uint64_t>(*data - pos));
    pos = *data;
    if (pos >= size) break;
    const off_t end = NextHole(in, pos, size);
    auto reached = CopyExtent(in, out, pos, end, path, observe, buf);
    if (!reached.ok()) return reached.error();
    if (*reached < end) {  // shorter than st_size said: copy what there was
      copied.size = static_cast<uint64_t>(*reached);
      break;
    }
    pos = end;
  }
  if (ftruncate(out, static_cast<off_t>(copied.size)) != 0) {
    return CopyFailure("ftruncate", path, LastErrno());
  }
  struct stat written;
  if (fstat(out, &written) != 0) return CopyFailure("fstat", path, LastErrno());
  copied.bytes_on_disk = BytesOnDisk(written);
  return copied;
}

}  // namespace sandrun::storage
