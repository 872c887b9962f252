// The TCP rendezvous's messages (src/bootstrap/wire): a Hello and a Reply come back from their bytes as they
// went in, a message cut anywhere is "not yet whole" rather than misread, long texts are cut at 255 bytes
// on both sides alike, and a peer of another version or another program is recognised as such.
#include <string>

#include <gtest/gtest.h>

#include "bootstrap/wire.hpp"
#include "common/expect_error.hpp"

namespace gpuxfer {
namespace {

using detail::Hello;
using detail::Reply;

Hello sample() {
  Hello hello;
  hello.world_size = 70000;  // past 16 bits: every byte of the field counts
  hello.rank = 65537;
  hello.local_rank = 3;
  hello.host = "node-a.cluster";
  hello.gpu = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  hello.job = "slurm:4242.3";
  return hello;
}

TEST(Wire, AHelloComesBackAsItWent) {
  const Hello sent = sample();
  const auto got = detail::decode_hello(detail::encode(sent));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->magic, detail::wire_magic);
  EXPECT_EQ(got->version, detail::wire_version);
  EXPECT_EQ(got->world_size, sent.world_size);
  EXPECT_EQ(got->rank, sent.rank);
  EXPECT_EQ(got->local_rank, sent.local_rank);
  EXPECT_EQ(got->host, sent.host);
  EXPECT_EQ(got->gpu, sent.gpu);
  EXPECT_EQ(got->job, sent.job);
}

TEST(Wire, EmptyTextsComeBackEmpty) {
  Hello sent = sample();
  sent.host.clear();
  sent.gpu.clear();
  sent.job.clear();
  const auto got = detail::decode_hello(detail::encode(sent));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->host, "");
  EXPECT_EQ(got->gpu, "");
  EXPECT_EQ(got->job, "");
  EXPECT_EQ(got->rank, sent.rank);
}

// Rank 0 reads a Hello as its bytes arrive: every proper prefix must be "not yet", never a Hello.
TEST(Wire, AHelloCutAnywhereIsNotYetWhole) {
  const std::string bytes = detail::encode(sample());
  for (std::size_t size = 0; size < bytes.size(); ++size) {
    EXPECT_FALSE(detail::decode_hello(bytes.substr(0, size)).has_value()) << size << " of " << bytes.size();
  }
}

TEST(Wire, TextsOver255BytesAreCutAlikeOnBothSides) {
  Hello sent = sample();
  sent.host = std::string(300, 'h');
  sent.gpu = std::string(256, 'g');
  sent.job = std::string(400, 'j');
  const auto got = detail::decode_hello(detail::encode(sent));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->host, std::string(255, 'h'));
  EXPECT_EQ(got->gpu, std::string(255, 'g'));
  EXPECT_EQ(got->job, std::string(255, 'j'));
}

// Another version's Hello is read up to its host, whatever follows, so that rank 0 can name the peer
// and its version.
TEST(Wire, AHelloOfAnotherVersionIsReadUpToItsHost) {
  Hello sent = sample();
  sent.version = 1;
  const auto got = detail::decode_hello(detail::encode(sent));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->version, 1);
  EXPECT_EQ(got->rank, sent.rank);
  EXPECT_EQ(got->host, sent.host);
  EXPECT_EQ(got->job, "");
}

TEST(Wire, AReplyComesBackAsItWent) {
  const std::string blob("\0\n\xff id", 6);
  for (const Reply& sent : {Reply{true, blob}, Reply{false, "rank 0 refused it"}, Reply{true, ""}}) {
    const std::string bytes = detail::encode(sent);
    for (std::size_t size = 0; size < bytes.size(); ++size) {
      EXPECT_FALSE(detail::decode_reply(bytes.substr(0, size)).has_value()) << size;
    }
    const auto got = detail::decode_reply(bytes);
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->ok, sent.ok);
    EXPECT_EQ(got->payload, sent.payload);
  }
}

TEST(Wire, AReplyFromAnotherProgramOrTooLargeIsRefused) {
  EXPECT_TRUE(test::throws_error_containing([] { (void)detail::decode_reply("HTTP/1.1 400 Bad"); },
                                            Errc::comm_error, {"not gpuxfer's rank 0", "MASTER_PORT"}));
  std::string huge = detail::encode(Reply{true, ""});
  huge[5] = '\x7f';  // the payload length's high byte: about 2 GiB
  EXPECT_TRUE(test::throws_error_containing([&] { (void)detail::decode_reply(huge); }, Errc::comm_error,
                                            {"over the limit of 1048576"}));
}

}  // namespace
}  // namespace gpuxfer
