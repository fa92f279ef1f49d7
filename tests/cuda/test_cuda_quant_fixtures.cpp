// Issue 26's evidence on the GPU: every llama-quantize file of shared/fixtures/quant (all the
// weight types, llama.cpp's type mixes and fallbacks) loads on the cuda backend, and its logits
// meet the same rule as on the CPU (quant/quant_fixture_eval.h): mean |d| <= 1.1x and max |d|
// <= 2x llama.cpp's own error against each reference, greedy prefix agreement on the trained
// model.
#include <gtest/gtest.h>

#include "cuda/cuda_test_util.h"
#include "quant/quant_fixture_eval.h"
#include "support/fixtures.h"

namespace geist {
namespace {

TEST(CudaQuantFixtures, EveryLlamaQuantizeFileWithinLlamaCppsOwnError) {
  GEIST_REQUIRE_FIXTURES();
  GEIST_REQUIRE_CUDA();
  quant_test::check_every_quant_fixture(BackendKind::CUDA);
}

}  // namespace
}  // namespace geist
