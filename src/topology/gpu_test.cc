#include "topology/gpu.h"

#include <gtest/gtest.h>

namespace baton::topo {
namespace {

TEST(GpuCatalogTest, HasTheSevenIssueTypes) {
  for (const char* name : {"A100-40GB", "A100-80GB", "H100-SXM", "H800", "H200", "B200", "GB200"}) {
    auto g = FindGpu(name);
    ASSERT_TRUE(g.ok()) << name;
    EXPECT_EQ((*g)->name, name);
    EXPECT_GT((*g)->bf16.value(), 0);
    EXPECT_GT((*g)->hbm.value(), 0);
    EXPECT_GT((*g)->nvlink_per_direction.value(), 0);
  }
}

TEST(GpuCatalogTest, AliasesAndPeaks) {
  EXPECT_EQ((*FindGpu("a100-sxm4-80gb"))->name, "A100-80GB");
  EXPECT_EQ((*FindGpu("h100"))->name, "H100-SXM");
  EXPECT_EQ((*FindGpu("NVIDIA-H100-80GB-HBM3"))->name, "H100-SXM");
  const GpuSpec& h100 = **FindGpu("H100-SXM");
  EXPECT_NEAR(ToTFlops(h100.Peak(Dtype::kBf16)), 989.4, 0.1);
  EXPECT_NEAR(ToTFlops(h100.Peak(Dtype::kFp8)), 1978.9, 0.1);
  EXPECT_EQ(h100.Peak(Dtype::kFp16), h100.Peak(Dtype::kBf16));
  EXPECT_EQ((*FindGpu("A100-80GB"))->Peak(Dtype::kFp8).value(), 0);
  EXPECT_NEAR(ToGBps((*FindGpu("H800"))->nvlink_per_direction), 200, 1e-9);
}

TEST(GpuCatalogTest, UnknownTypeNamesTheKnownOnes) {
  auto g = FindGpu("TPUv5");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("unknown GPU type 'TPUv5'"), std::string::npos);
  EXPECT_NE(g.status().message().find("H100-SXM"), std::string::npos);
  EXPECT_FALSE(ParseDtype("int4").ok());
  EXPECT_EQ(*ParseDtype("BF16"), Dtype::kBf16);
}

}  // namespace
}  // namespace baton::topo
