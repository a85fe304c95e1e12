#pragma once
#include "flashpp/attention.hpp"
#include "flashpp/error.hpp"
#include "flashpp/options.hpp"
#include "flashpp/tensor.hpp"
