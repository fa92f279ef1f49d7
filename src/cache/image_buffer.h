// Buffers for snapshot images and tier objects. They are fresh allocations of tens to hundreds
// of MiB, and on a VM their first touch is what a copy into them costs (a page fault per 4 KiB
// page, as slow as the copy itself or slower: docs/BENCHMARKS.md "Tiers"). Where the kernel
// grants transparent huge pages on request (`madvise` mode, Debian's default), asking for them
// makes it one fault per 2 MiB.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace geist_cache {

// Replaces *v's contents with n zero bytes in a buffer of exactly its own (its old one is
// freed), faulted in as transparent huge pages where the kernel allows them. Throws
// std::bad_alloc like vector::resize.
void fresh_buffer(std::vector<uint8_t>* v, size_t n);

// Asks for transparent huge pages over the whole 2 MiB pages inside [p, p + n) (best effort;
// nothing for less than 4 MiB). Call before the memory is first touched.
void advise_huge_pages(void* p, size_t n);

}  // namespace geist_cache
