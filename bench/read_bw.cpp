// Measures the machine's read bandwidth from memory: T threads each sum their share of a
// buffer much larger than the caches; prints the best of R passes in GB/s. The reference
// figure next to geist bench's "GB/s of weights" (decode reads every weight once per token).
//   g++ -O2 -march=native -pthread bench/read_bw.cpp -o read_bw && ./read_bw [MiB] [T] [R]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 1024;
  const int threads = argc > 2 ? std::atoi(argv[2]) : 2;
  const int reps = argc > 3 ? std::atoi(argv[3]) : 5;
  const size_t n = mib * 1048576 / sizeof(uint64_t);
  std::vector<uint64_t> buf(n, 1);  // touched: every page resident before timing
  double best = 0;
  uint64_t total = 0;
  for (int r = 0; r < reps; ++r) {
    std::vector<uint64_t> sums(static_cast<size_t>(threads));
    const auto t0 = std::chrono::steady_clock::now();
    std::vector<std::thread> ts;
    for (int t = 0; t < threads; ++t) {
      ts.emplace_back([&, t] {
        const size_t b = n * t / threads, e = n * (t + 1) / threads;
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = b; i + 4 <= e; i += 4) {
          s0 += buf[i];
          s1 += buf[i + 1];
          s2 += buf[i + 2];
          s3 += buf[i + 3];
        }
        sums[static_cast<size_t>(t)] = s0 + s1 + s2 + s3;
      });
    }
    for (auto& t : ts) t.join();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (uint64_t v : sums) total += v;
    const double gbps = static_cast<double>(n * sizeof(uint64_t)) / s / 1e9;
    if (gbps > best) best = gbps;
  }
  std::printf("read bandwidth: %.2f GB/s (%zu MiB, %d threads, best of %d; checksum %llu)\n", best,
              mib, threads, reps, static_cast<unsigned long long>(total));
  return 0;
}
