# RINGSIDE_SANITIZE=address|thread: instrument every target of the build (ringside's libraries,
# daemons, the NCCL plugin, the fake NVML/CUDA libraries and the tests) with a sanitizer.
#   address: ASan + UBSan, UBSan not recoverable (a finding fails the test).
#   thread:  TSan.
# Use a build dir of its own (scripts/test-sanitized.sh uses build-asan / build-tsan); the third-party
# libraries (Debian's gRPC, protobuf, Abseil, ...) are not instrumented. docs/reliability.md.
set(RINGSIDE_SANITIZE "" CACHE STRING "Sanitizer build: address (ASan+UBSan) or thread (TSan); empty for none")
set_property(CACHE RINGSIDE_SANITIZE PROPERTY STRINGS "" address thread)

if(RINGSIDE_SANITIZE STREQUAL "address")
  set(RINGSIDE_SANITIZE_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
    -fno-omit-frame-pointer)
elseif(RINGSIDE_SANITIZE STREQUAL "thread")
  # -U__SANITIZE_THREAD__: Debian's protobuf headers add two members to MapFieldBase when that
  # macro is set (map_field.h, a TSan aid) while its libprotobuf.so was built without them, so an
  # instrumented ringside and the library disagree on the layout of every message with a map
  # field (UploadBuffer::Footprint crashed in MapField::SpaceUsedExcludingSelfNoLock). Without
  # the macro the headers match the uninstrumented libraries (protobuf, gRPC, Abseil); the
  # instrumentation itself does not depend on it.
  set(RINGSIDE_SANITIZE_FLAGS -fsanitize=thread -fno-omit-frame-pointer -U__SANITIZE_THREAD__)
elseif(NOT RINGSIDE_SANITIZE STREQUAL "")
  message(FATAL_ERROR "RINGSIDE_SANITIZE must be address, thread or empty (got '${RINGSIDE_SANITIZE}')")
endif()

if(RINGSIDE_SANITIZE_FLAGS)
  add_compile_options(${RINGSIDE_SANITIZE_FLAGS})
  add_link_options(${RINGSIDE_SANITIZE_FLAGS})
  message(STATUS "ringside: sanitizer build (${RINGSIDE_SANITIZE}): ${RINGSIDE_SANITIZE_FLAGS}")
endif()
