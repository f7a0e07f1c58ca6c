// The TCP transport's frame decoder, fed bytes directly (no sockets): a
// message arrives whole, byte by byte, and in parts out of order; every
// malformed header (bad magic, unknown connection, out of bounds, outside
// the credit window, disagreeing parts, credit never owed) is an error that
// names what is wrong, and nothing is delivered; a withdrawn connection's
// sender forgets its fabric once the receiver says it withdrew too; a posted receive places
// its message at the destination, and once withdrawn writes nothing more
// there. Real sockets are covered by
// the mp.tcp_* tests (whole collectives between processes).
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "runtime/transport/tcp_transport.h"

namespace chorus::runtime {
namespace {

using tcpwire::Header;
using tcpwire::Kind;

std::vector<unsigned char> frame(Header h, const std::vector<unsigned char>& payload = {}) {
  h.magic = h.magic == 0 ? tcpwire::kMagic : h.magic;
  std::vector<unsigned char> out(tcpwire::kHeaderBytes);
  tcpwire::encode(h, out.data());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Header data(uint64_t seq, uint64_t offset, uint64_t length, uint64_t total, uint32_t channel = 0,
            uint32_t mark = 0) {
  Header h;
  h.kind = static_cast<uint32_t>(Kind::kData);
  h.channel = channel;
  h.mark = mark;
  h.seq = seq;
  h.offset = offset;
  h.length = length;
  h.total = total;
  return h;
}

std::vector<unsigned char> bytes(size_t n, unsigned char first) {
  std::vector<unsigned char> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

class TcpFrames : public ::testing::Test {
 protected:
  // Rank 1 of 2; an inbound connection from rank 0 (channel 0, 2 slots of
  // 64 bytes) and an outbound one to it.
  void SetUp() override {
    in_.reset();  // connections go before the links they are enrolled in
    out_.reset();
    links_ = TcpLinks::forTesting(1, 2, bell_);
    in_ = links_->connect(0, 0, 0, 1, 2, 64);
    out_ = links_->connect(0, 0, 1, 0, 2, 64);
  }
  Status feed(const std::vector<unsigned char>& b) {
    return links_->feedForTesting(0, b.data(), b.size());
  }
  std::vector<unsigned char> take() {
    size_t n = 0;
    const void* p = in_->receiver().tryPeek(&n);
    if (p == nullptr) return {};
    std::vector<unsigned char> v(static_cast<const unsigned char*>(p),
                                 static_cast<const unsigned char*>(p) + n);
    in_->receiver().release();
    return v;
  }
  Doorbell bell_;
  std::unique_ptr<TcpLinks> links_;
  std::unique_ptr<Connection> in_, out_;
};

TEST(TcpWire, HeaderRoundTrips) {
  Header h = data(7, 4096, 100, 1 << 20, 3, 0xfedcba98);
  h.magic = tcpwire::kMagic;
  h.fabric = 9;
  unsigned char b[tcpwire::kHeaderBytes];
  tcpwire::encode(h, b);
  Header g = tcpwire::decode(b);
  EXPECT_EQ(g.magic, h.magic);
  EXPECT_EQ(g.fabric, 9u);
  EXPECT_EQ(g.channel, 3u);
  EXPECT_EQ(g.seq, 7u);
  EXPECT_EQ(g.offset, 4096u);
  EXPECT_EQ(g.length, 100u);
  EXPECT_EQ(g.total, 1u << 20);
  EXPECT_EQ(g.mark, 0xfedcba98u);
}

TEST(TcpWire, HelloRoundTripsAndTruncationsAreRefused) {
  tcpwire::Hello h{"secret", 3, 8, 1};
  std::string enc = tcpwire::encodeHello(h);
  auto back = tcpwire::decodeHello(enc);
  ASSERT_TRUE(back.isOk());
  EXPECT_EQ(back.value().rank, 3u);
  EXPECT_EQ(back.value().index, 1u);
  for (size_t n = 0; n < enc.size(); ++n)
    EXPECT_FALSE(tcpwire::decodeHello(std::string_view(enc).substr(0, n)).isOk()) << n;
  EXPECT_FALSE(tcpwire::decodeHello(enc + "x").isOk());
}

TEST_F(TcpFrames, AMessageArrivesWhole) {
  ASSERT_TRUE(feed(frame(data(0, 0, 16, 16), bytes(16, 1))).isOk());
  EXPECT_EQ(take(), bytes(16, 1));
  EXPECT_TRUE(take().empty());
}

TEST_F(TcpFrames, AMessageArrivesByteByByte) {
  auto f = frame(data(0, 0, 40, 40), bytes(40, 5));
  for (unsigned char c : f) ASSERT_TRUE(feed({c}).isOk());
  EXPECT_EQ(take(), bytes(40, 5));
}

TEST_F(TcpFrames, PartsOutOfOrderAndMessagesOutOfOrderComplete) {
  // Message 1's only part, then message 0's second half, then its first
  // half: nothing is delivered until message 0 is whole, then both in order.
  ASSERT_TRUE(feed(frame(data(1, 0, 8, 8), bytes(8, 100))).isOk());
  ASSERT_TRUE(feed(frame(data(0, 20, 12, 32), bytes(12, 20))).isOk());
  EXPECT_TRUE(take().empty());
  ASSERT_TRUE(feed(frame(data(0, 0, 20, 32), bytes(20, 0))).isOk());
  EXPECT_EQ(take(), bytes(32, 0));
  EXPECT_EQ(take(), bytes(8, 100));
}

// The sender's mark (SendPort::commit) reaches the receiver with its
// message, whatever the parts it came in.
TEST_F(TcpFrames, AMessageKeepsItsMark) {
  ASSERT_TRUE(feed(frame(data(0, 8, 8, 16, 0, 0x01000003), bytes(8, 8))).isOk());
  ASSERT_TRUE(feed(frame(data(0, 0, 8, 16, 0, 0x01000003), bytes(8, 0))).isOk());
  ASSERT_TRUE(feed(frame(data(1, 0, 4, 4, 0, 7), bytes(4, 0))).isOk());
  size_t n = 0;
  ASSERT_NE(in_->receiver().tryPeek(&n), nullptr);
  EXPECT_EQ(in_->receiver().peekedMark(), 0x01000003u);
  in_->receiver().release();
  ASSERT_NE(in_->receiver().tryPeek(&n), nullptr);
  EXPECT_EQ(in_->receiver().peekedMark(), 7u);
}

TEST_F(TcpFrames, EmptyMessage) {
  ASSERT_TRUE(feed(frame(data(0, 0, 0, 0))).isOk());
  size_t n = 99;
  EXPECT_NE(in_->receiver().tryPeek(&n), nullptr);
  EXPECT_EQ(n, 0u);
}

// Posted receives (RecvPort::expect): a message that has not begun to
// arrive when its receiver posts a destination is placed there, not in a
// slot; one that is too long, or began arriving before, goes to its slot.
TEST_F(TcpFrames, AnExpectedMessageIsPlacedAtItsDestination) {
  std::vector<unsigned char> dst(64, 0xee);
  in_->receiver().expect(dst.data(), dst.size());
  in_->receiver().expect(dst.data(), dst.size());  // again: changes nothing
  // In two parts, the second first.
  ASSERT_TRUE(feed(frame(data(0, 20, 20, 40), bytes(20, 20))).isOk());
  ASSERT_TRUE(feed(frame(data(0, 0, 20, 40), bytes(20, 0))).isOk());
  size_t n = 0;
  EXPECT_EQ(in_->receiver().tryPeek(&n), dst.data());
  EXPECT_EQ(n, 40u);
  EXPECT_EQ(std::vector<unsigned char>(dst.begin(), dst.begin() + 40), bytes(40, 0));
  EXPECT_EQ(dst[40], 0xee);
  in_->receiver().release();
  // The next message was not expected: its slot.
  ASSERT_TRUE(feed(frame(data(1, 0, 8, 8), bytes(8, 50))).isOk());
  EXPECT_EQ(take(), bytes(8, 50));
  EXPECT_EQ(dst[0], 0);
}

TEST_F(TcpFrames, AMessageTooLongGoesToItsSlot) {
  std::vector<unsigned char> dst(64, 0xee);
  in_->receiver().expect(dst.data(), 16);
  ASSERT_TRUE(feed(frame(data(0, 0, 40, 40), bytes(40, 1))).isOk());
  size_t n = 0;
  EXPECT_NE(in_->receiver().tryPeek(&n), dst.data());
  EXPECT_EQ(take(), bytes(40, 1));
  EXPECT_EQ(dst, std::vector<unsigned char>(64, 0xee));
}

// A message that began arriving in its slot before its receiver posted a
// place is claimed late: what is in moves there once, the rest arrives
// there.
TEST_F(TcpFrames, AMessageAlreadyArrivingIsClaimedLate) {
  std::vector<unsigned char> dst(64, 0xee);
  // Message 0: its first part whole and 5 bytes of its second part in,
  // then the place is posted, then the rest and its last part.
  auto second = frame(data(0, 10, 10, 30), bytes(10, 10));
  ASSERT_TRUE(feed(frame(data(0, 0, 10, 30), bytes(10, 0))).isOk());
  ASSERT_TRUE(
      feed(std::vector<unsigned char>(second.begin(), second.begin() + tcpwire::kHeaderBytes + 5))
          .isOk());
  in_->receiver().expect(dst.data(), dst.size());
  ASSERT_TRUE(
      feed(std::vector<unsigned char>(second.begin() + tcpwire::kHeaderBytes + 5, second.end()))
          .isOk());
  ASSERT_TRUE(feed(frame(data(0, 20, 10, 30), bytes(10, 20))).isOk());
  size_t n = 0;
  EXPECT_EQ(in_->receiver().tryPeek(&n), dst.data());
  EXPECT_EQ(n, 30u);
  EXPECT_EQ(std::vector<unsigned char>(dst.begin(), dst.begin() + 30), bytes(30, 0));
  EXPECT_EQ(dst[30], 0xee);
  in_->receiver().release();
  // A message already whole is not claimed: its slot.
  ASSERT_TRUE(feed(frame(data(1, 0, 8, 8), bytes(8, 90))).isOk());
  in_->receiver().expect(dst.data(), dst.size());
  EXPECT_EQ(take(), bytes(8, 90));
  EXPECT_EQ(dst[0], 0);
}

TEST_F(TcpFrames, AbandonedExpectationsWriteNothingMore) {
  std::vector<unsigned char> dst(64, 0xee);
  // Nothing arriving: withdrawn quietly, and the link goes on (to a slot).
  in_->receiver().expect(dst.data(), dst.size());
  in_->receiver().abandon();
  ASSERT_TRUE(feed(frame(data(0, 0, 8, 8), bytes(8, 7))).isOk());
  EXPECT_EQ(take(), bytes(8, 7));
  // Half arrived at the destination: the link ends, the rest is never
  // written there.
  in_->receiver().expect(dst.data(), dst.size());
  auto f = frame(data(1, 0, 40, 40), bytes(40, 0));
  ASSERT_TRUE(
      feed(std::vector<unsigned char>(f.begin(), f.begin() + tcpwire::kHeaderBytes + 20)).isOk());
  in_->receiver().abandon();
  EXPECT_FALSE(
      feed(std::vector<unsigned char>(f.begin() + tcpwire::kHeaderBytes + 20, f.end())).isOk());
  EXPECT_EQ(std::vector<unsigned char>(dst.begin(), dst.begin() + 20), bytes(20, 0));
  EXPECT_EQ(std::vector<unsigned char>(dst.begin() + 20, dst.end()),
            std::vector<unsigned char>(44, 0xee));
  size_t n = 0;
  EXPECT_EQ(in_->receiver().tryPeek(&n), nullptr);
}

TEST_F(TcpFrames, MalformedFramesAreErrors) {
  struct Case {
    const char* what;
    std::vector<unsigned char> bytes;
  };
  Header badMagic = data(0, 0, 4, 4);
  badMagic.magic = 0xdeadbeef;
  Header badKind = data(0, 0, 4, 4);
  badKind.kind = 77;
  Header credit;
  credit.kind = static_cast<uint32_t>(Kind::kCredit);
  credit.seq = 1;  // nothing was ever sent on the outbound connection
  Header unknownCredit = credit;
  unknownCredit.channel = 5;
  std::vector<Case> cases = {
      {"bad magic", frame(badMagic, bytes(4, 0))},
      {"unknown kind", frame(badKind, bytes(4, 0))},
      {"unknown connection", frame(data(0, 0, 4, 4, /*channel=*/1), bytes(4, 0))},
      {"out of bounds", frame(data(0, 0, 65, 65))},
      {"out of bounds", frame(data(0, 60, 8, 64))},
      {"out of bounds", frame(data(0, ~uint64_t{0} - 2, 4, 64))},
      {"out of bounds", frame(data(0, 0, 8, 4))},
      {"outside the credit window", frame(data(2, 0, 4, 4))},
      {"credit for messages never sent", frame(credit)},
      {"credit for an unknown connection", frame(unknownCredit)},
  };
  for (const Case& c : cases) {
    SetUp();  // a fresh link each time
    Status st = feed(c.bytes);
    ASSERT_FALSE(st.isOk()) << c.what;
    EXPECT_NE(st.message().find(c.what), std::string::npos) << st.message();
    EXPECT_TRUE(take().empty()) << c.what;
  }
  // Two parts of one message that disagree on its length.
  SetUp();
  ASSERT_TRUE(feed(frame(data(0, 0, 4, 16), bytes(4, 0))).isOk());
  Status st = feed(frame(data(0, 4, 4, 32), bytes(4, 0)));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("disagree"), std::string::npos);
  // ... or on its mark.
  SetUp();
  ASSERT_TRUE(feed(frame(data(0, 0, 4, 8, 0, 1), bytes(4, 0))).isOk());
  st = feed(frame(data(0, 4, 4, 8, 0, 2), bytes(4, 0)));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("disagree"), std::string::npos);
  // A message already delivered cannot come again.
  SetUp();
  ASSERT_TRUE(feed(frame(data(0, 0, 4, 4), bytes(4, 0))).isOk());
  EXPECT_FALSE(feed(frame(data(0, 0, 4, 4), bytes(4, 0))).isOk());
}

TEST_F(TcpFrames, TheCreditWindowFollowsReleases) {
  ASSERT_TRUE(feed(frame(data(0, 0, 4, 4), bytes(4, 0))).isOk());
  ASSERT_TRUE(feed(frame(data(1, 0, 4, 4), bytes(4, 4))).isOk());
  EXPECT_EQ(take(), bytes(4, 0));  // frees slot 0 for message 2
  ASSERT_TRUE(feed(frame(data(2, 0, 4, 4), bytes(4, 8))).isOk());
  EXPECT_EQ(take(), bytes(4, 4));
  EXPECT_EQ(take(), bytes(4, 8));
}

Header control(Kind kind, uint64_t seq, uint32_t channel = 0) {
  Header h;
  h.kind = static_cast<uint32_t>(kind);
  h.channel = channel;
  h.seq = seq;
  return h;
}

// A receiver that withdraws its end tells the sender, on the socket its
// credits take (so after all of them); the sender then forgets the fabric,
// and a credit for it after that is an error, not one more to ignore.
TEST_F(TcpFrames, AWithdrawnReceiverTellsItsSender) {
  ASSERT_TRUE(feed(frame(data(0, 0, 4, 4), bytes(4, 0))).isOk());  // the peer's socket
  in_.reset();
  std::vector<Header> queued = links_->queuedForTesting(0);
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].kind, static_cast<uint32_t>(Kind::kWithdrawn));
  EXPECT_EQ(queued[0].fabric, 0u);
  EXPECT_EQ(queued[0].channel, 0u);
}

TEST_F(TcpFrames, ASenderForgetsAFabricOnceItsReceiversWithdrew) {
  ASSERT_TRUE(feed(frame(control(Kind::kCredit, 0))).isOk());
  out_.reset();
  EXPECT_EQ(links_->fabricsAwaitedForTesting(), 1u);
  // The receiver may still have been reading: its last credit is no error.
  EXPECT_TRUE(feed(frame(control(Kind::kCredit, 0))).isOk());
  ASSERT_TRUE(feed(frame(control(Kind::kWithdrawn, 0))).isOk());
  EXPECT_EQ(links_->fabricsAwaitedForTesting(), 0u);
  Status st = feed(frame(control(Kind::kCredit, 0)));
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("credit for an unknown connection"), std::string::npos);
  SetUp();
  ASSERT_TRUE(feed(frame(control(Kind::kCredit, 0))).isOk());
  out_.reset();
  ASSERT_TRUE(feed(frame(control(Kind::kWithdrawn, 0))).isOk());
  st = feed(frame(control(Kind::kWithdrawn, 0)));  // twice
  ASSERT_FALSE(st.isOk());
  EXPECT_NE(st.message().find("withdrawal of an unknown connection"), std::string::npos);
}

TEST_F(TcpFrames, AReceiverThatWithdrewFirstLeavesNothingToRemember) {
  ASSERT_TRUE(feed(frame(control(Kind::kWithdrawn, 0))).isOk());
  out_.reset();
  EXPECT_EQ(links_->fabricsAwaitedForTesting(), 0u);
}

TEST_F(TcpFrames, RandomBytesNeverCrash) {
  std::mt19937 rng(42);
  for (int i = 0; i < 2000; ++i) {
    SetUp();
    // Start from a valid frame and corrupt a few bytes of it.
    auto f = frame(data(rng() % 3, rng() % 70, rng() % 70, rng() % 70), bytes(rng() % 80, 0));
    for (int k = 0; k < 3; ++k) f[rng() % f.size()] = static_cast<unsigned char>(rng());
    (void)feed(f);
    (void)take();
  }
}

}  // namespace
}  // namespace chorus::runtime
