#define BOOST_TEST_MODULE admission
#include "run/admission.h"

#include <boost/test/unit_test.hpp>
#include <thread>

using sandrun::run::Admission;

BOOST_AUTO_TEST_SUITE(AdmissionQueue)

BOOST_AUTO_TEST_CASE(admits_up_to_the_slot_count) {
  Admission a(2, 0, std::chrono::milliseconds(0));
  auto t1 = a.Acquire();
  auto t2 = a.Acquire();
  auto t3 = a.Acquire();
  BOOST_TEST(t1.admitted());
  BOOST_TEST(t2.admitted());
  BOOST_TEST(!t3.admitted());
  BOOST_TEST(a.active() == 2);
}

BOOST_AUTO_TEST_CASE(released_slot_goes_to_a_waiter) {
  Admission a(1, 1, std::chrono::seconds(30));
  auto first = std::make_unique<Admission::Ticket>(a.Acquire());
  bool admitted = false;
  std::thread waiter([&] { admitted = a.Acquire().admitted(); });
  while (a.queued() == 0) std::this_thread::yield();
  first.reset();
  waiter.join();
  BOOST_TEST(admitted);
  BOOST_TEST(a.active() == 0);
}

BOOST_AUTO_TEST_CASE(full_queue_refuses_at_once) {
  Admission a(1, 1, std::chrono::seconds(30));
  auto held = a.Acquire();
  std::thread waiter([&] { (void)a.Acquire(); });
  while (a.queued() == 0) std::this_thread::yield();
  BOOST_TEST(!a.Acquire().admitted());  // queue of one is taken
  { Admission::Ticket drop = std::move(held); }
  waiter.join();
}

BOOST_AUTO_TEST_CASE(wait_expires) {
  Admission a(1, 4, std::chrono::milliseconds(20));
  auto held = a.Acquire();
  BOOST_TEST(!a.Acquire().admitted());
  BOOST_TEST(a.queued() == 0);
}

BOOST_AUTO_TEST_SUITE_END()

// 24 requests for one busy session held all 22 worker threads.
BOOST_AUTO_TEST_SUITE(SessionWaiters)

using sandrun::run::WaiterGate;

BOOST_AUTO_TEST_CASE(bounds_waiters_per_session) {
  WaiterGate gate(2, 10);
  auto a = gate.Enter("alice/s");
  auto b = gate.Enter("alice/s");
  auto c = gate.Enter("alice/s");
  BOOST_TEST(a.admitted());
  BOOST_TEST(b.admitted());
  BOOST_TEST(!c.admitted());
  BOOST_TEST(gate.Enter("bob/s").admitted());  // another session has places of its own
  BOOST_TEST(gate.waiting() == 2);
}

BOOST_AUTO_TEST_CASE(bounds_waiters_in_total) {
  WaiterGate gate(2, 3);
  auto a = gate.Enter("s1");
  auto b = gate.Enter("s2");
  auto c = gate.Enter("s3");
  BOOST_TEST(!gate.Enter("s4").admitted());
  BOOST_TEST(gate.waiting() == 3);
}

BOOST_AUTO_TEST_CASE(places_are_given_back) {
  WaiterGate gate(1, 1);
  {
    auto a = gate.Enter("s");
    BOOST_TEST(!gate.Enter("s").admitted());
    WaiterGate::Pass moved = std::move(a);
    BOOST_TEST(!gate.Enter("t").admitted());
  }
  BOOST_TEST(gate.waiting() == 0);
  BOOST_TEST(gate.Enter("s").admitted());
}

BOOST_AUTO_TEST_SUITE_END()
