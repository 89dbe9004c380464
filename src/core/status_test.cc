#include "core/status.h"

#include <gtest/gtest.h>

namespace baton {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return InvalidArgumentError("odd: " + std::to_string(x));
  return x / 2;
}

Result<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return Status::Ok();
}

TEST(StatusTest, OkIsDefaultAndCheap) {
  Status s;
  EXPECT_TRUE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kOk);
  EXPECT_EQ(s.ToString(), "OK");
  EXPECT_EQ(s.message(), "");
}

TEST(StatusTest, ErrorCarriesCodeAndMessage) {
  Status s = NotFoundError("model 'gpt-5'");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_EQ(s.ToString(), "NOT_FOUND: model 'gpt-5'");
  EXPECT_EQ(s.WithPrefix("cluster.yaml:3").message(), "cluster.yaml:3: model 'gpt-5'");
}

TEST(StatusTest, AFieldErrorCarriesItsFieldAndReasonThroughAPrefix) {
  Status s = InvalidFieldError("gpus_per_task", "must divide gpus");
  EXPECT_EQ(s.message(), "field 'gpus_per_task': must divide gpus");
  Status p = s.WithPrefix("job 'a'");
  EXPECT_EQ(p.message(), "job 'a': field 'gpus_per_task': must divide gpus");
  EXPECT_EQ(p.field(), "gpus_per_task");
  EXPECT_EQ(p.reason(), "must divide gpus");
  EXPECT_EQ(p.code(), StatusCode::kInvalidArgument);
  Status plain = NotFoundError("no such job");
  EXPECT_EQ(plain.field(), "");
  EXPECT_EQ(plain.reason(), "no such job");
  EXPECT_EQ(Status::Ok().field(), "");
}

TEST(ResultTest, PropagatesThroughMacros) {
  EXPECT_EQ(*Quarter(8), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "odd: 3");
  EXPECT_TRUE(CheckEven(4).ok());
  EXPECT_EQ(CheckEven(5).code(), StatusCode::kInvalidArgument);
}

TEST(ResultDeathTest, ValueOfErrorAborts) {
  Result<int> r = InternalError("boom");
  EXPECT_DEATH((void)r.value(), "boom");
}

}  // namespace
}  // namespace baton
