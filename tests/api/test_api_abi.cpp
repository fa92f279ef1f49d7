// geist_abi.h: the ABI version and the layout text bindings check their struct mirrors with.
#include <gtest/gtest.h>

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "geist/geist.h"
#include "geist/geist_abi.h"
#include "geist/geist_batch.h"

namespace geist::test {
namespace {

TEST(ApiAbi, VersionIsTheHeaders) { EXPECT_EQ(geist_abi_version(), uint32_t{GEIST_ABI_VERSION}); }

TEST(ApiAbi, LayoutIsValidJsonWithEveryPublicStruct) {
  const nlohmann::json j = nlohmann::json::parse(geist_abi_layout());
  EXPECT_EQ(j.at("abi_version").get<uint32_t>(), uint32_t{GEIST_ABI_VERSION});
  EXPECT_EQ(j.at("pointer_size").get<size_t>(), sizeof(void*));
  const auto& s = j.at("structs");
  EXPECT_EQ(s.at("geist_model_params").at("size").get<size_t>(), sizeof(geist_model_params));
  EXPECT_EQ(s.at("geist_sampler_params").at("size").get<size_t>(), sizeof(geist_sampler_params));
  EXPECT_EQ(s.at("geist_session_params").at("size").get<size_t>(), sizeof(geist_session_params));
  const auto& seed = s.at("geist_sampler_params").at("fields").at("seed");
  EXPECT_EQ(seed.at(0).get<size_t>(), offsetof(geist_sampler_params, seed));
  EXPECT_EQ(seed.at(1).get<size_t>(), sizeof(uint64_t));
  const auto& sampler = s.at("geist_session_params").at("fields").at("sampler");
  EXPECT_EQ(sampler.at(0).get<size_t>(), offsetof(geist_session_params, sampler));
  EXPECT_EQ(sampler.at(1).get<size_t>(), sizeof(geist_sampler_params));
  // Every field of every struct, so a field added to a header but not to the layout shows.
  size_t n_fields = 0;
  for (const auto& [name, st] : s.items()) n_fields += st.at("fields").size();
  // geist.h: 7 in geist_model_params (vocab_only last), 10 in geist_sampler_params
  // (frequency_penalty last), 5 in geist_session_params; geist_batch.h: 7 (token last).
  EXPECT_EQ(n_fields, 7u + 10u + 5u + 7u);
  EXPECT_EQ(s.size(), 4u);
  const auto& item = s.at("geist_batch_item");
  EXPECT_EQ(item.at("size").get<size_t>(), sizeof(geist_batch_item));
  EXPECT_EQ(item.at("fields").at("struct_size").at(0).get<size_t>(), 0u);
  EXPECT_EQ(item.at("fields").at("status").at(0).get<size_t>(), offsetof(geist_batch_item, status));
  EXPECT_EQ(item.at("fields").at("token").at(0).get<size_t>(), offsetof(geist_batch_item, token));
  const auto& vocab_only = s.at("geist_model_params").at("fields").at("vocab_only");
  EXPECT_EQ(vocab_only.at(0).get<size_t>(), offsetof(geist_model_params, vocab_only));
  const auto& freq = s.at("geist_sampler_params").at("fields").at("frequency_penalty");
  EXPECT_EQ(freq.at(0).get<size_t>(), offsetof(geist_sampler_params, frequency_penalty));
  EXPECT_EQ(freq.at(1).get<size_t>(), sizeof(float));
  EXPECT_EQ(geist_abi_layout(), geist_abi_layout());  // one static text
}

}  // namespace
}  // namespace geist::test
