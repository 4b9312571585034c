/*
 * harness_skip.c — the harness's own check that a skip is reported as one
 * (CTest: harness.skip runs it and expects exit status 77, a SKIP line with
 * the reason, and "1 passed, 0 failed, 1 skipped").
 */
#include "tg_test.h"

static void test_passes(void) { ASSERT_EQ_INT(1 + 1, 2); }

static void test_cannot_run_here(void) { TG_SKIP("this check needs what the machine lacks"); }

int main(void)
{
    RUN_TEST(test_passes);
    RUN_TEST(test_cannot_run_here);
    return TG_TEST_SUMMARY();
}
