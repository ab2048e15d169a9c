// Kubernetes resource.Quantity parsing ("500m", "2", "1.5", "1e3", "16Gi", "100k", ...), as the
// API server accepts it:
//   quantity ::= [+-] number suffix
//   number   ::= digits | digits "." digits | digits "." | "." digits
//   suffix   ::= "" | binarySI (Ki Mi Gi Ti Pi Ei) | decimalSI (n u m k M G T P E)
//              | ("e" | "E") [+-] digits                     (decimal exponent)
// Values are exact (no floating point); results that are not whole units are rounded away from
// zero, as the API's Quantity.Value()/MilliValue() do.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessera::kube {

// The quantity in thousandths ("500m" -> 500, "2" -> 2000, "1.5" -> 1500, "100u" -> 1).
// Throws std::invalid_argument naming the text when it is not a quantity or does not fit int64.
int64_t parse_quantity_milli(std::string_view text);

// The quantity in whole units, rounded up ("16Gi" -> 17179869184, "100m" -> 1). Throws as above.
int64_t parse_quantity_bytes(std::string_view text);

// Bytes to MiB, rounded up (for requests: never under-reserve).
int64_t to_mib(int64_t bytes);
// Bytes to MiB, rounded down (for capacities: never over-promise).
int64_t to_mib_floor(int64_t bytes);

}  // namespace tessera::kube
