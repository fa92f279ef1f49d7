// The model's pool of forward workspaces (archs/workspace.h): sessions that take turns on one
// workspace get bitwise the results of fresh (zero-filled) workspaces, so no activation byte
// passes from one session to the next; sequential forwards reuse one workspace, concurrent
// ones get their own; on the CPU backends a state owns no activation scratch.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "archs/workspace.h"
#include "test_qwen35_support.h"

namespace geist {
namespace {

using qwen35_test::Loaded;

Loaded load_on(const std::string& name, BackendKind kind) {
  Loaded l;
  Status st = GgufFile::open(test::fixture_path("models/" + name), &l.file);
  EXPECT_TRUE(st.is_ok()) << st.message();
  if (!st) return l;
  st = load_arch_model(*l.file, kind, Logger{}, &l.model);
  EXPECT_TRUE(st.is_ok()) << name << ": " << st.message();
  return l;
}

// Pseudo-random ids in [1, n_vocab) (a fixed LCG: the same sequence on every run).
std::vector<int32_t> ids(int32_t n, uint32_t seed, int32_t n_vocab) {
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (int32_t& t : out) {
    seed = seed * 1664525u + 1013904223u;
    t = 1 + static_cast<int32_t>((seed >> 8) % static_cast<uint32_t>(n_vocab - 1));
  }
  return out;
}

// One session's schedule: a prefill of every row's logits, then single-token steps. Step i
// runs forward number i of the session.
struct Schedule {
  std::vector<int32_t> prompt;
  std::vector<int32_t> steps;
  std::vector<std::vector<float>> logits;  // per forward: every row (prefill) or the last
  std::unique_ptr<ArchState> state;
  int32_t pos = 0;
  size_t next = 0;  // forwards run

  size_t n_forwards() const { return 1 + steps.size(); }
  // Runs the session's next forward.
  void run_next(const ArchModel& m, ThreadPool& pool) {
    const size_t nv = static_cast<size_t>(m.info().n_vocab);
    const bool prefill = next == 0;
    const int32_t* toks = prefill ? prompt.data() : &steps[next - 1];
    const int32_t n = prefill ? static_cast<int32_t>(prompt.size()) : 1;
    std::vector<float> out(static_cast<size_t>(prefill ? n : 1) * nv);
    const Status st = m.forward(*state, toks, n, pos, prefill, out.data(), pool);
    EXPECT_TRUE(st.is_ok()) << st.message();
    logits.push_back(std::move(out));
    pos += n;
    ++next;
  }
};

Schedule make_schedule(const ArchModel& m, int32_t n_prompt, int32_t n_steps, uint32_t seed) {
  Schedule s;
  const int32_t nv = m.info().n_vocab;
  s.prompt = ids(n_prompt, seed, nv);
  s.steps = ids(n_steps, seed + 7, nv);
  const Status st = m.create_state(n_prompt + n_steps + 1, &s.state);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return s;
}

bool bitwise_equal(const Schedule& a, const Schedule& b) {
  if (a.logits.size() != b.logits.size()) return false;
  for (size_t i = 0; i < a.logits.size(); ++i) {
    if (a.logits[i].size() != b.logits[i].size() ||
        std::memcmp(a.logits[i].data(), b.logits[i].data(), a.logits[i].size() * 4) != 0) {
      return false;
    }
  }
  return true;
}

// Sessions A and B of different lengths take turns (A, B, A, B, ...) on the pool's one
// workspace, which B's rows have just filled each time A comes back; each must match its run
// alone on a fresh workspace per forward (the pool emptied before each: fresh ones are
// zero-filled). A's prompt spans two micro-batches, B's is shorter, so B leaves rows of its own
// in the workspace past A's next decode row.
void check_turns(const std::string& model, BackendKind kind) {
  SCOPED_TRACE(model + " on " + backend_kind_name(kind));
  Loaded l = load_on(model, kind);
  ASSERT_TRUE(l.model);
  const ArchModel& m = *l.model;
  ThreadPool pool(2);
  const int32_t n_a = m.micro_batch() + 21;
  Schedule a_fresh = make_schedule(m, n_a, 5, 11);
  Schedule b_fresh = make_schedule(m, 40, 5, 99);
  for (Schedule* s : {&a_fresh, &b_fresh}) {
    while (s->next < s->n_forwards()) {
      m.drop_idle_workspaces();
      s->run_next(m, pool);
    }
  }
  Schedule a = make_schedule(m, n_a, 5, 11);
  Schedule b = make_schedule(m, 40, 5, 99);
  m.drop_idle_workspaces();
  for (size_t i = 0; i < a.n_forwards(); ++i) {
    a.run_next(m, pool);
    b.run_next(m, pool);
  }
  EXPECT_EQ(m.workspaces(), 1u) << "sequential forwards reuse one workspace";
  EXPECT_TRUE(bitwise_equal(a, a_fresh)) << "A after B differs from A on fresh workspaces";
  EXPECT_TRUE(bitwise_equal(b, b_fresh)) << "B after A differs from B on fresh workspaces";
  EXPECT_EQ(a.state->own_workspace(), nullptr) << "a CPU state owns no activation scratch";
}

TEST(WorkspacePool, LlamaTurnsMatchFreshWorkspaces) {
  GEIST_REQUIRE_FIXTURES();
  check_turns("stories260K.gguf", BackendKind::CPU);
  check_turns("stories260K.gguf", BackendKind::CPU_DEVICE_LOCAL);
}

TEST(WorkspacePool, Qwen35TurnsMatchFreshWorkspaces) {
  GEIST_REQUIRE_FIXTURES();
  check_turns("tiny-qwen35-q8_0.gguf", BackendKind::CPU);
  check_turns("tiny-qwen35-q8_0.gguf", BackendKind::CPU_DEVICE_LOCAL);
}

// Two threads forwarding their own sessions at once: each gets a workspace of its own (at
// most one per concurrent forward exists) and its results are those of the session run alone.
TEST(WorkspacePool, ConcurrentForwardsMatchAlone) {
  GEIST_REQUIRE_FIXTURES();
  Loaded l = load_on("tiny-qwen35-q8_0.gguf", BackendKind::CPU);
  ASSERT_TRUE(l.model);
  const ArchModel& m = *l.model;
  std::vector<Schedule> alone, together;
  for (uint32_t seed : {5u, 6u}) {
    alone.push_back(make_schedule(m, 70, 12, seed));
    together.push_back(make_schedule(m, 70, 12, seed));
  }
  {
    ThreadPool pool(1);
    for (Schedule& s : alone) {
      while (s.next < s.n_forwards()) s.run_next(m, pool);
    }
  }
  std::vector<std::thread> threads;
  for (Schedule& s : together) {
    threads.emplace_back([&m, &s] {
      ThreadPool pool(1);
      while (s.next < s.n_forwards()) s.run_next(m, pool);
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_GE(m.workspaces(), 1u);
  EXPECT_LE(m.workspaces(), 2u);
  for (size_t i = 0; i < alone.size(); ++i) {
    EXPECT_TRUE(bitwise_equal(together[i], alone[i])) << "session " << i;
  }
}

// The pool itself: a lent workspace is not lent again until it comes back; the one returned
// last is lent first; drop_idle frees only the idle ones.
TEST(WorkspacePool, LendsEachOnceAndReusesTheLastReturned) {
  WorkspacePool pool;
  int made = 0;
  const WorkspacePool::Make make = [&made](std::unique_ptr<ArchWorkspace>* out) {
    ++made;
    *out = std::make_unique<ArchWorkspace>();
    return Status::ok();
  };
  ArchWorkspace* first = nullptr;
  {
    WorkspaceLease a, b;
    ASSERT_TRUE(WorkspaceLease::borrow(pool, make, &a).is_ok());
    ASSERT_TRUE(WorkspaceLease::borrow(pool, make, &b).is_ok());
    EXPECT_NE(a.get(), b.get());
    EXPECT_EQ(made, 2);
    EXPECT_EQ(pool.size(), 2u);
    first = a.get();
    b = WorkspaceLease();  // back to the pool
    a = WorkspaceLease();  // back last: lent first next time
    EXPECT_EQ(pool.size(), 2u);
  }
  {
    WorkspaceLease c;
    ASSERT_TRUE(WorkspaceLease::borrow(pool, make, &c).is_ok());
    EXPECT_EQ(made, 2);
    EXPECT_EQ(c.get(), first);
    pool.drop_idle();  // the other idle one goes; c stays lent
    EXPECT_EQ(pool.size(), 1u);
  }
  EXPECT_EQ(pool.size(), 1u);
  const WorkspacePool::Make fail = [](std::unique_ptr<ArchWorkspace>*) {
    return Status(GEIST_E_OOM, "no memory");
  };
  WorkspaceLease d, e;
  ASSERT_TRUE(WorkspaceLease::borrow(pool, fail, &d).is_ok());  // the idle one, no make
  const Status st = WorkspaceLease::borrow(pool, fail, &e);
  EXPECT_EQ(st.code(), GEIST_E_OOM);
  EXPECT_EQ(e.get(), nullptr);
  EXPECT_EQ(pool.size(), 1u);
}

}  // namespace
}  // namespace geist
