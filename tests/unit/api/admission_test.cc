#define BOOST_TEST_MODULE admission
#include "api/admission.h"

#include <boost/test/unit_test.hpp>
#include <thread>

using sandrun::api::Admission;

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
