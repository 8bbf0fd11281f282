// The server's CPU time while measured, read from /proc/<pid>/stat (utime + stime).
package main

import (
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every Linux we run on (Go
// cannot ask sysconf(_SC_CLK_TCK) without cgo).
const clockTicks = 100

// serverPIDs and brokerPIDs are the processes whose CPU the report counts (-server-pids,
// -broker-pids); none: not counted.
var serverPIDs, brokerPIDs []int

func parsePIDs(list string) []int {
	var pids []int
	for _, field := range strings.Split(list, ",") {
		if pid, err := strconv.Atoi(strings.TrimSpace(field)); err == nil && pid > 0 {
			pids = append(pids, pid)
		}
	}
	return pids
}

// cpuOf is the user + system CPU time so far of every process of `pids` (0 for one that is
// gone or unreadable).
func cpuOf(pids []int) float64 {
	var total float64
	for _, pid := range pids {
		total += processCPUSeconds(pid)
	}
	return total
}

// watched is the CPU so far of the servers and of the brokers.
func watched() [2]float64 {
	return [2]float64{cpuOf(serverPIDs), cpuOf(brokerPIDs)}
}

func processCPUSeconds(pid int) float64 {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces: count fields after its closing parenthesis.
	text := string(stat)
	fields := strings.Fields(text[strings.LastIndexByte(text, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / clockTicks
}
