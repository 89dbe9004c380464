#include "server/store/sqlite_wal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <cstring>
#include <vector>

namespace baton::server {
namespace {

constexpr std::size_t kHeaderBytes = 32;
constexpr std::size_t kFrameHeaderBytes = 24;
constexpr std::uint32_t kMagic = 0x377f0682;  // | 1: checksums over big-endian words
constexpr std::uint32_t kVersion = 3007000;

std::uint32_t BigEndian32(const unsigned char* p) {
  return (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) | (std::uint32_t{p[2]} << 8) |
         std::uint32_t{p[3]};
}

std::uint32_t LittleEndian32(const unsigned char* p) {
  return (std::uint32_t{p[3]} << 24) | (std::uint32_t{p[2]} << 16) | (std::uint32_t{p[1]} << 8) |
         std::uint32_t{p[0]};
}

// SQLite's WAL checksum (walChecksumBytes): `n` a multiple of 8, continuing from `sum`.
void Checksum(bool big_endian, const unsigned char* data, std::size_t n,
              std::array<std::uint32_t, 2>& sum) {
  for (std::size_t i = 0; i + 8 <= n; i += 8) {
    const std::uint32_t x0 = big_endian ? BigEndian32(data + i) : LittleEndian32(data + i);
    const std::uint32_t x1 = big_endian ? BigEndian32(data + i + 4) : LittleEndian32(data + i + 4);
    sum[0] += x0 + sum[1];
    sum[1] += x1 + sum[0];
  }
}

// Reads up to `n` bytes (fewer only at the end of the file); -1 on an error.
ssize_t ReadFull(int fd, unsigned char* out, std::size_t n) {
  std::size_t got = 0;
  while (got < n) {
    ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return -1;
    if (r == 0) break;
    got += static_cast<std::size_t>(r);
  }
  return static_cast<ssize_t>(got);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<WalScan> ScanWriteAheadLog(const std::string& wal_path) {
  WalScan scan;
  Fd fd(::open(wal_path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return scan;
    return UnavailableError("cannot open " + wal_path + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    return UnavailableError("cannot stat " + wal_path + ": " + std::strerror(errno));
  }
  scan.exists = true;
  scan.bytes = static_cast<std::uint64_t>(st.st_size);
  if (scan.bytes == 0) return scan;  // checkpointed with TRUNCATE: nothing to recover

  auto fail = [&](const std::string& what) {
    return UnavailableError("cannot read " + wal_path + ": " + what + ": " + std::strerror(errno));
  };
  std::array<unsigned char, kHeaderBytes> header{};
  const ssize_t got = ReadFull(fd.get(), header.data(), header.size());
  if (got < 0) return fail("header");
  // SQLite writes the header with one write: a shorter file was cut.
  if (static_cast<std::size_t>(got) < kHeaderBytes) {
    scan.damage = "is shorter than its 32-byte header (" + std::to_string(got) + " bytes)";
    scan.frames_dropped = -1;
    return scan;
  }
  const std::uint32_t magic = BigEndian32(&header[0]);
  const std::uint32_t page_size = BigEndian32(&header[8]);
  const bool big_endian = (magic & 1) != 0;
  std::array<std::uint32_t, 2> sum{0, 0};
  Checksum(big_endian, header.data(), 24, sum);
  const char* invalid = nullptr;
  if ((magic & ~1u) != kMagic) {
    invalid = "bad magic number";
  } else if (BigEndian32(&header[4]) != kVersion) {
    invalid = "unknown format version";
  } else if (page_size < 512 || page_size > 65536 || (page_size & (page_size - 1)) != 0) {
    invalid = "bad page size";
  } else if (sum[0] != BigEndian32(&header[24]) || sum[1] != BigEndian32(&header[28])) {
    invalid = "bad checksum";
  }
  if (invalid != nullptr) {
    scan.damage = std::string("has an invalid header (") + invalid + ")";
    scan.frames_dropped = -1;
    return scan;
  }
  scan.page_size = page_size;

  const std::size_t frame_bytes = kFrameHeaderBytes + page_size;
  std::vector<unsigned char> frame(frame_bytes);
  std::int64_t current_frames = 0;  // frames carrying the header's salts
  std::int64_t last_current = 0;    // the last of them
  std::int64_t first_invalid = 0;   // 0: none yet
  bool checksum_failed = false;
  std::size_t partial = 0;  // bytes of a last, incomplete frame
  for (std::int64_t i = 1;; ++i) {
    const ssize_t n = ReadFull(fd.get(), frame.data(), frame_bytes);
    if (n < 0) return fail("frame " + std::to_string(i));
    if (n == 0) break;
    if (static_cast<std::size_t>(n) < frame_bytes) {
      partial = static_cast<std::size_t>(n);
      break;
    }
    scan.frames = i;
    const bool current = std::memcmp(&frame[8], &header[16], 8) == 0;
    if (current) {
      ++current_frames;
      last_current = i;
    }
    if (first_invalid != 0) continue;
    if (!current) {
      first_invalid = i;
      continue;
    }
    std::array<std::uint32_t, 2> next = sum;
    Checksum(big_endian, frame.data(), 8, next);
    Checksum(big_endian, frame.data() + kFrameHeaderBytes, page_size, next);
    if (BigEndian32(&frame[0]) == 0 || next[0] != BigEndian32(&frame[16]) ||
        next[1] != BigEndian32(&frame[20])) {
      first_invalid = i;
      checksum_failed = true;
      continue;
    }
    sum = next;
    if (BigEndian32(&frame[4]) != 0) scan.frames_replayed = i;  // a commit frame
  }
  scan.frames_dropped = current_frames - scan.frames_replayed + (partial > 0 ? 1 : 0);
  const std::string of = " of " + std::to_string(scan.frames + (partial > 0 ? 1 : 0));
  if (checksum_failed) {
    scan.damage = "fails its checksum at frame " + std::to_string(first_invalid) + of;
  } else if (first_invalid != 0 && last_current > first_invalid) {
    scan.damage = "has a frame of another generation (salt) at frame " +
                  std::to_string(first_invalid) + of + ", before frame " +
                  std::to_string(last_current) + " of its own";
  } else if (partial > 0 && partial != kFrameHeaderBytes) {
    scan.damage = "ends " + std::to_string(partial) + " bytes into frame " +
                  std::to_string(scan.frames + 1) + " (frames are " + std::to_string(frame_bytes) +
                  " bytes)";
  }
  return scan;
}

}  // namespace baton::server
